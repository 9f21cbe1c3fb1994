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
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from realengine.engine import CONTEXT, MODEL_NAME
from telemetry.parse import _KNOWN_BASES

pytestmark = pytest.mark.real_engine

CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Say something short."}]}
TIMEOUT = 120


def post(base: str, path: str, body: dict[str, Any]) -> requests.Response:
    return requests.post(f"{base}{path}", json=body, timeout=TIMEOUT)


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def missing(reference: Any, candidate: Any, path: str = "$") -> list[str]:
    """Where ``candidate`` lacks what ``reference`` fills, or fills it with another kind of value."""
    if reference is None:
        return []
    if candidate is None or kind(reference) != kind(candidate):
        return [f"{path}: {kind(reference)} in the real engine, {kind(candidate)} in the simulated one"]
    out: list[str] = []
    if isinstance(reference, dict):
        for key, value in reference.items():
            out += missing(value, candidate.get(key), f"{path}.{key}")
    elif isinstance(reference, list) and reference:
        if not candidate:
            return [f"{path}: a non-empty list in the real engine, empty in the simulated one"]
        out += missing(reference[0], candidate[0], f"{path}[0]")
    return out


def both(real_vllm: str, sim_vllm: str, path: str, body: dict[str, Any]) -> tuple[requests.Response, ...]:
    return post(real_vllm, path, body), post(sim_vllm, path, body)


def sse(response: requests.Response) -> list[tuple[str | None, Any]]:
    """(event name, data) of each server-sent event; ``[DONE]`` kept as a string."""
    events = []
    for block in response.text.split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                raw = line[len("data: ") :]
                data = raw if raw == "[DONE]" else json.loads(raw)
        if data is not None:
            events.append((name, data))
    return events


def collapsed(names: list[str]) -> list[str]:
    """Event names with repeats of the same name in a row collapsed (token deltas vary in number)."""
    return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]


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
        assert missing(real[index][1], sim[index][1], f"chunk[{index}]") == []


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


ERRORS = [
    ("/v1/chat/completions", {**CHAT, "max_tokens": CONTEXT + 1}),
    ("/v1/completions", {"model": MODEL_NAME, "prompt": "the " * (CONTEXT + 8), "max_tokens": 1}),
    ("/v1/chat/completions", {**CHAT, "model": "no-such-model", "max_tokens": 4}),
    ("/v1/messages", {**CHAT, "model": "no-such-model", "max_tokens": 4}),
    ("/v1/responses", {"model": "no-such-model", "input": "Hi."}),
]


@pytest.mark.parametrize(
    ("path", "body"), ERRORS, ids=["max-tokens", "prompt", "model", "messages", "responses"]
)
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
    assert reasons(sim_vllm) == reasons(real_vllm) == {"stop", "length", "abort", "error", "repetition"}


def reasons(base: str) -> set[str]:
    text = requests.get(f"{base}/metrics", timeout=TIMEOUT).text
    return set(re.findall(r'vllm:request_success_total\{[^}]*finished_reason="([^"]+)"', text))


def test_http_counters_name_every_api_by_its_route(real_vllm, sim_vllm):
    for base in (real_vllm, sim_vllm):
        text = requests.get(f"{base}/metrics", timeout=TIMEOUT).text
        handlers = set(re.findall(r'http_requests_total\{handler="([^"]+)"', text))
        assert {"/v1/chat/completions", "/v1/messages", "/v1/responses"} <= handlers, (base, handlers)
