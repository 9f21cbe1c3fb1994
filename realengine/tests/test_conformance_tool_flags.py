"""Both engines started without a tool parser (vLLM's default): what each API does with tools then.

vLLM 0.32 refuses, on chat and Messages, a ``required`` or named tool choice without
``--tool-call-parser`` and ``auto`` without ``--enable-auto-tool-choice`` (a request with tools and no
``tool_choice`` is ``auto``); its Responses route refuses none and answers in text. The simulated engine
must refuse the same requests with the same bodies and serve the rest alike.
"""

from __future__ import annotations

from typing import Any

import pytest

from realengine.engine import MODEL_NAME
from realengine.tests.conformance import ASK, CHAT_TOOLS, MESSAGES_TOOLS, RESPONSES_TOOLS, alike, both

pytestmark = pytest.mark.real_engine

ENGINE_FLAGS: tuple[str, ...] = ()  # no --tool-call-parser, no --enable-auto-tool-choice

CHAT = {"model": MODEL_NAME, "messages": ASK, "tools": CHAT_TOOLS, "max_tokens": 4}
MESSAGES = {"model": MODEL_NAME, "messages": ASK, "tools": MESSAGES_TOOLS, "max_tokens": 4}
NAMED = {"type": "function", "function": {"name": "get_weather"}}
REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("/v1/chat/completions", {**CHAT, "tool_choice": "required"}),
    ("/v1/chat/completions", {**CHAT, "tool_choice": NAMED}),
    ("/v1/chat/completions", {**CHAT, "tool_choice": "auto"}),
    ("/v1/chat/completions", CHAT),
    ("/v1/messages", MESSAGES),
    ("/v1/messages", {**MESSAGES, "tool_choice": {"type": "any"}}),
]


IDS = ["chat-required", "chat-named", "chat-auto", "chat-default", "messages", "messages-any"]


@pytest.mark.parametrize(("path", "body"), REFUSED, ids=IDS)
def test_tool_choices_the_engine_was_not_started_for_are_refused_alike(real_vllm, sim_vllm, path, body):
    real, sim = both(real_vllm, sim_vllm, path, body)
    assert real.status_code == 400
    assert (sim.status_code, sim.json()) == (real.status_code, real.json())


@pytest.mark.parametrize("choice", ["required", "auto", {"type": "function", "name": "get_weather"}])
def test_the_responses_route_ignores_tools_without_a_parser(real_vllm, sim_vllm, choice):
    body = {"model": MODEL_NAME, "input": ASK[0]["content"], "tools": RESPONSES_TOOLS, "max_output_tokens": 4}
    for answer in alike(real_vllm, sim_vllm, "/v1/responses", {**body, "tool_choice": choice}):
        assert [item["type"] for item in answer["output"]] == ["message"]
        assert answer["status"] == "incomplete" and answer["tool_choice"] == choice


def test_tool_choice_none_is_served_in_text(real_vllm, sim_vllm):
    for answer in alike(real_vllm, sim_vllm, "/v1/chat/completions", {**CHAT, "tool_choice": "none"}):
        assert answer["choices"][0]["finish_reason"] == "length" and not answer["choices"][0]["message"].get(
            "tool_calls"
        )
