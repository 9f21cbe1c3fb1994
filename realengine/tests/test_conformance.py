"""One conformance suite, two engines: the real vLLM judges the sandbox's simulated vLLM.

Every request goes to both, configured alike (served model name, context, prefix caching). The real
engine's answer is the reference: every field it fills (not null) must be in the simulated engine's
answer with the same kind of value; streams must carry the same events in the same order; error bodies
must be the same; and every metric family Tandem reads must be exported by both or by neither, with the
same type and label names. The simulated engine may not be kinder than the real one.
"""

from __future__ import annotations

import json
import re

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from realengine.engine import CONTEXT, MODEL_NAME
from realengine.tests.conformance import (
    ANY,
    ASK,
    CAP,
    NAMED,
    ROUTES,
    TIMEOUT,
    TOOL_CHAT,
    TOOL_MESSAGES,
    TOOL_RESPONSES,
    alike,
    ask,
    both,
    chunk_kind,
    collapsed,
    cut_at_cap_or_ended,
    missing,
    post,
    satisfies,
    sse,
)
from telemetry.parse import _KNOWN_BASES

pytestmark = pytest.mark.real_engine

CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Say something short."}]}


def test_chat_completion(real_vllm, sim_vllm):
    real, sim = both(real_vllm, sim_vllm, "/v1/chat/completions", {**CHAT, "max_tokens": 6})
    assert real.status_code == sim.status_code == 200
    assert missing(real.json(), sim.json()) == []
    for body in (real.json(), sim.json()):
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["usage"]["completion_tokens"] == 6
        assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 6


def test_completion(real_vllm, sim_vllm):
    body = {"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 5}
    real, sim = both(real_vllm, sim_vllm, "/v1/completions", body)
    assert real.status_code == sim.status_code == 200
    assert missing(real.json(), sim.json()) == []
    assert real.json()["choices"][0]["finish_reason"] == sim.json()["choices"][0]["finish_reason"] == "length"


def test_chat_stream(real_vllm, sim_vllm):
    body = {**CHAT, "max_tokens": 5, "stream": True, "stream_options": {"include_usage": True}}
    real, sim = (sse(response) for response in both(real_vllm, sim_vllm, "/v1/chat/completions", body))
    for events in (real, sim):
        datas = [data for _, data in events]
        assert datas[-1] == "[DONE]"
        assert datas[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert datas[-2]["choices"] == [] and datas[-2]["usage"]["completion_tokens"] == 5
        assert datas[-3]["choices"][0]["finish_reason"] == "length"
        assert sum(1 for d in datas[1:-2] if d["choices"][0]["delta"].get("content")) >= 1
    for index in (0, 1, -3, -2):  # the role chunk, a token, the last token, the usage chunk
        # a busy real engine may send all tokens in one chunk, the last: compare it with the last
        last = index == 1 and real[1][1]["choices"][0]["finish_reason"] is not None
        assert missing(real[index][1], sim[-3 if last else index][1], f"chunk[{index}]") == []


def test_anthropic_messages(real_vllm, sim_vllm):
    real, sim = both(real_vllm, sim_vllm, "/v1/messages", {**CHAT, "max_tokens": 6, "system": "Be brief."})
    assert real.status_code == sim.status_code == 200
    assert missing(real.json(), sim.json()) == []
    for body in (real.json(), sim.json()):
        assert body["stop_reason"] == "max_tokens" and body["usage"]["output_tokens"] == 6


def test_anthropic_messages_stream(real_vllm, sim_vllm):
    body = {**CHAT, "max_tokens": 4, "stream": True}
    real, sim = (sse(response) for response in both(real_vllm, sim_vllm, "/v1/messages", body))
    assert collapsed([name for name, _ in real]) == collapsed([name for name, _ in sim]) == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
        "message_stop",
    ]  # fmt: skip
    for index in (0, 1, 2, -2, -1):
        assert missing(real[index][1], sim[index][1], f"event[{index}]") == []
    for events in (real, sim):
        assert events[-2][1]["usage"]["output_tokens"] == 4
        assert events[0][1]["message"]["usage"]["input_tokens"] == events[-2][1]["usage"]["input_tokens"]


def test_responses(real_vllm, sim_vllm):
    body = {"model": MODEL_NAME, "input": "Say hi.", "instructions": "Be brief.", "max_output_tokens": 6}
    real, sim = both(real_vllm, sim_vllm, "/v1/responses", body)
    assert real.status_code == sim.status_code == 200
    assert missing(real.json(), sim.json()) == []
    for answer in (real.json(), sim.json()):
        assert answer["status"] == "incomplete" and answer["incomplete_details"] == {
            "reason": "max_output_tokens"
        }
        assert answer["usage"]["output_tokens"] == 6


def test_responses_stream(real_vllm, sim_vllm):
    body = {"model": MODEL_NAME, "input": "Say hi.", "max_output_tokens": 4, "stream": True}
    real, sim = (sse(response) for response in both(real_vllm, sim_vllm, "/v1/responses", body))
    assert collapsed([name for name, _ in real]) == collapsed([name for name, _ in sim])
    for index in (0, 1, 2, 3, 4, -4, -3, -2, -1):
        assert missing(real[index][1], sim[index][1], f"event[{index}]") == []
    for events in (real, sim):
        assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
        assert events[-1][1]["response"]["usage"]["output_tokens"] == 4


CHAT_TOOL = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
RESPONSES_TOOL = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
ERRORS = [
    pytest.param("/v1/chat/completions", {**CHAT, "max_tokens": CONTEXT + 1}, id="max-tokens"),
    pytest.param(
        "/v1/completions",
        {"model": MODEL_NAME, "prompt": "the " * (CONTEXT + 8), "max_tokens": 1},
        id="prompt",
    ),
    pytest.param("/v1/chat/completions", {**CHAT, "model": "no-such-model", "max_tokens": 4}, id="model"),
    pytest.param("/v1/messages", {**CHAT, "model": "no-such-model", "max_tokens": 4}, id="messages"),
    pytest.param("/v1/responses", {"model": "no-such-model", "input": "Hi."}, id="responses"),
    pytest.param("/v1/chat/completions", {**CHAT, "max_tokens": 3, "min_tokens": 5}, id="min-over-max"),
    pytest.param(
        "/v1/completions",
        {"model": MODEL_NAME, "prompt": "Hi.", "max_tokens": 3, "min_tokens": -1},
        id="min-negative",
    ),
    pytest.param("/v1/chat/completions", {**CHAT, "min_tokens": "some"}, id="min-not-a-number"),
    pytest.param("/v1/chat/completions", {**CHAT, "tools": []}, id="tools-empty"),
    pytest.param("/v1/chat/completions", {**CHAT, "tool_choice": "required"}, id="tool-choice-without-tools"),
    pytest.param(
        "/v1/chat/completions", {**CHAT, "tools": CHAT_TOOL, "tool_choice": "sometimes"}, id="tool-choice-bad"
    ),
    pytest.param(
        "/v1/chat/completions",
        {**CHAT, "tools": CHAT_TOOL, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
        id="tool-choice-unknown",
    ),
    pytest.param(
        "/v1/responses",
        {
            "model": MODEL_NAME,
            "input": "Hi.",
            "tools": RESPONSES_TOOL,
            "tool_choice": {"type": "function", "name": "nope"},
        },
        id="responses-tool-unknown",
    ),
    pytest.param(
        "/v1/responses",
        {"model": MODEL_NAME, "input": "Hi.", "tool_choice": "required"},
        id="responses-required-no-tools",
    ),
]


@pytest.mark.parametrize(("path", "body"), ERRORS)
def test_error_bodies_are_the_real_engines(real_vllm, sim_vllm, path, body):
    real, sim = both(real_vllm, sim_vllm, path, body)
    assert (sim.status_code, sim.json()) == (real.status_code, real.json())


def test_prompt_and_output_over_the_context_are_served_clamped(real_vllm, sim_vllm):
    """vLLM 0.32 clamps max_tokens to what the context leaves; it does not refuse the request."""
    prompt = "the " * (CONTEXT - 40)  # one token a word for both engines' tokenizers
    body = {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 1000}
    real, sim = both(real_vllm, sim_vllm, "/v1/completions", body)
    assert real.status_code == sim.status_code == 200
    for answer in (real.json(), sim.json()):
        assert answer["choices"][0]["finish_reason"] == "length"
        assert answer["usage"]["total_tokens"] <= CONTEXT


def families(base: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Families Tandem reads: name → (type, label names of their samples but ``le``)."""
    text = requests.get(f"{base}/metrics", timeout=TIMEOUT).text
    found = {}
    for family in text_string_to_metric_families(text):
        if family.name not in _KNOWN_BASES and family.name.removesuffix("_total") not in _KNOWN_BASES:
            continue
        labels = frozenset(k for sample in family.samples for k in sample.labels if k != "le")
        found[family.name] = (family.type, labels)
    return found


TRAFFIC = [
    ("/v1/chat/completions", {**CHAT, "max_tokens": 2}),
    ("/v1/messages", {**CHAT, "max_tokens": 2}),
    ("/v1/responses", {"model": MODEL_NAME, "input": "Hi.", "max_output_tokens": 2}),
]


def test_metric_families_tandem_reads_are_the_real_engines(real_vllm, sim_vllm):
    for base in (real_vllm, sim_vllm):  # traffic on every API, so every labelled series exists
        for path, body in TRAFFIC:
            assert post(base, path, body).status_code == 200
    real, sim = families(real_vllm), families(sim_vllm)
    info = "vllm:cache_config_info"  # its labels are the engine's settings: the simulated one has fewer
    assert sim.pop(info)[1] <= real.pop(info)[1]
    assert {name: real[name] for name in real if sim.get(name) != real[name]} == {}, sim
    assert sorted(set(sim) - set(real)) == []  # the simulated engine exports nothing the real one lacks
    # the silent-recompute check reads prompt tokens by source (telemetry.datapath)
    assert real["vllm:prompt_tokens_by_source"] == ("counter", frozenset({"model_name", "engine", "source"}))
    assert reasons(sim_vllm) == reasons(real_vllm) == {"stop", "length", "abort", "error", "repetition"}


def reasons(base: str) -> set[str]:
    text = requests.get(f"{base}/metrics", timeout=TIMEOUT).text
    return set(re.findall(r'vllm:request_success_total\{[^}]*finished_reason="([^"]+)"', text))


def test_http_counters_name_every_api_by_its_route(real_vllm, sim_vllm):
    for base in (real_vllm, sim_vllm):
        text = requests.get(f"{base}/metrics", timeout=TIMEOUT).text
        handlers = set(re.findall(r'http_requests_total\{handler="([^"]+)"', text))
        assert {"/v1/chat/completions", "/v1/messages", "/v1/responses"} <= handlers, (base, handlers)


# --- Where answers end: end-of-sequence, max_tokens, and vLLM's ignore_eos / min_tokens ------------------
@pytest.mark.parametrize("route", list(ROUTES))
def test_answers_end_at_end_of_sequence_before_max_tokens(real_vllm, sim_vllm, route):
    assert cut_at_cap_or_ended(ask(real_vllm, route))
    assert ask(sim_vllm, route) == ("stop", 34)


@pytest.mark.parametrize("route", ["chat", "completions", "responses"])
def test_ignore_eos_generates_to_max_tokens(real_vllm, sim_vllm, route):
    assert ask(real_vllm, route, ignore_eos=True) == ask(sim_vllm, route, ignore_eos=True) == ("length", CAP)


def test_ignore_eos_is_read_as_vllm_reads_a_boolean(real_vllm, sim_vllm):
    """vLLM's request model takes "yes", "on", 1 for true, as pydantic does."""
    assert (
        ask(real_vllm, "chat", ignore_eos="yes") == ask(sim_vllm, "chat", ignore_eos="yes") == ("length", CAP)
    )
    assert ask(sim_vllm, "chat", ignore_eos="off") == ("stop", 34)


def test_messages_route_does_not_take_ignore_eos(real_vllm, sim_vllm):
    """vLLM 0.32's Messages request has no ignore_eos or min_tokens: they are dropped, not refused."""
    assert cut_at_cap_or_ended(ask(real_vllm, "messages", ignore_eos=True, min_tokens=60))
    assert ask(sim_vllm, "messages", ignore_eos=True, min_tokens=60) == ("stop", 34)


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_min_tokens_holds_end_of_sequence_back(real_vllm, sim_vllm, route):
    for base in (real_vllm, sim_vllm):
        reason, tokens = ask(base, route, min_tokens=60)
        assert tokens > 60 and cut_at_cap_or_ended((reason, tokens)), base
    assert ask(sim_vllm, route, min_tokens=60) == ("stop", 61)  # EOS as soon as it is allowed


def test_responses_route_does_not_take_min_tokens(real_vllm, sim_vllm):
    assert cut_at_cap_or_ended(ask(real_vllm, "responses", min_tokens=60))
    assert ask(sim_vllm, "responses", min_tokens=60) == ("stop", 34)


# --- Tool calls (both engines run with --enable-auto-tool-choice --tool-call-parser hermes) --------------
@pytest.mark.parametrize(
    ("choice", "finish"), [("required", "tool_calls"), (NAMED, "stop")], ids=["required", "named"]
)
def test_chat_tool_call(real_vllm, sim_vllm, choice, finish):
    for answer in alike(real_vllm, sim_vllm, "/v1/chat/completions", {**TOOL_CHAT, "tool_choice": choice}):
        assert answer["choices"][0]["finish_reason"] == finish  # vLLM: "stop" when the function was named
        message = answer["choices"][0]["message"]
        [call] = message["tool_calls"]
        assert message["content"] == "" and call["id"].startswith("chatcmpl-tool-")
        assert (call["type"], call["function"]["name"]) == ("function", "get_weather")
        assert satisfies(json.loads(call["function"]["arguments"]))


def test_chat_tool_call_stream(real_vllm, sim_vllm):
    body = {**TOOL_CHAT, "tool_choice": "required", "stream": True, "stream_options": {"include_usage": True}}
    real, sim = (sse(response) for response in both(real_vllm, sim_vllm, "/v1/chat/completions", body))
    for events in (real, sim):
        datas = [data for _, data in events]
        kinds = collapsed([chunk_kind(data) for data in datas])
        assert kinds == ["role", "call", "arguments", "finish", "usage", "done"]
        assert datas[-3]["choices"][0] | {"delta": {}} == datas[-3]["choices"][0]  # the finish chunk is empty
        assert datas[-3]["choices"][0]["finish_reason"] == "tool_calls"
        pieces = [d["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for d in datas[2:-3]]
        assert satisfies(json.loads("".join(pieces)))
    for index in (0, 1, 2, -3, -2):  # role, the call's name and id, arguments, finish, usage
        assert missing(real[index][1], sim[index][1], f"chunk[{index}]") == []


@pytest.mark.parametrize("choice", [{"type": "tool", "name": "get_weather"}, ANY], ids=["tool", "any"])
def test_messages_tool_use(real_vllm, sim_vllm, choice):
    for answer in alike(real_vllm, sim_vllm, "/v1/messages", {**TOOL_MESSAGES, "tool_choice": choice}):
        [block] = answer["content"]
        assert answer["stop_reason"] == "tool_use" and block["type"] == "tool_use"
        assert block["id"].startswith("chatcmpl-tool-") and block["name"] == "get_weather"
        assert satisfies(block["input"])


def test_messages_tool_use_stream(real_vllm, sim_vllm):
    body = {**TOOL_MESSAGES, "tool_choice": ANY, "stream": True}
    real, sim = (sse(response) for response in both(real_vllm, sim_vllm, "/v1/messages", body))
    for events in (real, sim):
        assert collapsed([name for name, _ in events]) == [
            "message_start", "content_block_start", "content_block_delta", "content_block_stop",
            "message_delta", "message_stop",
        ]  # fmt: skip
        block = events[1][1]["content_block"]
        assert (block["type"], block["name"], block["input"]) == ("tool_use", "get_weather", {})
        pieces = [data["delta"]["partial_json"] for name, data in events if name == "content_block_delta"]
        assert satisfies(json.loads("".join(pieces)))
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    for index in (0, 1, 2, -3, -2, -1):
        assert missing(real[index][1], sim[index][1], f"event[{index}]") == []


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "name": "get_weather"}], ids=["required", "named"]
)
def test_responses_function_call(real_vllm, sim_vllm, choice):
    for answer in alike(real_vllm, sim_vllm, "/v1/responses", {**TOOL_RESPONSES, "tool_choice": choice}):
        [item] = answer["output"]
        assert (answer["status"], answer["tool_choice"]) == ("completed", choice)
        assert (item["type"], item["name"], item["status"]) == ("function_call", "get_weather", "completed")
        assert item["id"].startswith("fc_") and item["call_id"].startswith("chatcmpl-tool-")
        assert satisfies(json.loads(item["arguments"]))


def test_responses_function_call_stream(real_vllm, sim_vllm):
    body = {**TOOL_RESPONSES, "tool_choice": {"type": "function", "name": "get_weather"}, "stream": True}
    real, sim = (sse(response) for response in both(real_vllm, sim_vllm, "/v1/responses", body))
    for events in (real, sim):
        assert collapsed([name for name, _ in events]) == [
            "response.created", "response.in_progress", "response.output_item.added",
            "response.function_call_arguments.delta", "response.function_call_arguments.done",
            "response.output_item.done", "response.completed",
        ]  # fmt: skip
        assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
        assert satisfies(json.loads(events[-3][1]["arguments"]))
    for index in (0, 2, 3, -3, -2, -1):
        assert missing(real[index][1], sim[index][1], f"event[{index}]") == []


def test_auto_tool_choice_calls_then_answers_the_tool_result(real_vllm, sim_vllm):
    """``auto`` (no tool_choice): the simulated model calls a tool, and answers in text once the result is
    in. The random real model writes no ``<tool_call>`` for the hermes parser, so it answers in text: only
    that both serve the turns is compared."""
    body = {**TOOL_CHAT, "max_tokens": 40}  # room for the simulated call (about a dozen tokens)
    real, sim = both(real_vllm, sim_vllm, "/v1/chat/completions", body)
    assert real.status_code == sim.status_code == 200
    assert real.json()["choices"][0]["finish_reason"] in ("length", "stop", "tool_calls")
    [call] = sim.json()["choices"][0]["message"]["tool_calls"]
    assert sim.json()["choices"][0]["finish_reason"] == "tool_calls"
    turn = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": call["id"], "content": "Sunny, 21 degrees."}
    follow = {**body, "messages": [*ASK, turn, result]}
    real, sim = both(real_vllm, sim_vllm, "/v1/chat/completions", follow)
    assert real.status_code == sim.status_code == 200
    for answer in (real.json(), sim.json()):
        assert not answer["choices"][0]["message"].get("tool_calls")
        assert answer["choices"][0]["message"]["content"]


def test_tool_choice_none_answers_in_text(real_vllm, sim_vllm):
    real, sim = both(
        real_vllm, sim_vllm, "/v1/chat/completions", {**TOOL_CHAT, "tool_choice": "none", "max_tokens": 6}
    )
    assert real.status_code == sim.status_code == 200
    for answer in (real.json(), sim.json()):
        assert (
            answer["choices"][0]["finish_reason"] == "length" and answer["choices"][0]["message"]["content"]
        )
        assert not answer["choices"][0]["message"].get("tool_calls")
