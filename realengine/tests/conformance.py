"""What the conformance tests share: requests to both engines, and comparing their answers' shapes."""

from __future__ import annotations

import json
from typing import Any

import requests

from realengine.engine import MODEL_NAME

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


def alike(real_vllm: str, sim_vllm: str, path: str, body: dict[str, Any]) -> tuple[Any, Any]:
    """Both engines' JSON answers to ``body``: both served it, and the simulated one fills what the real
    one fills."""
    real, sim = both(real_vllm, sim_vllm, path, body)
    assert real.status_code == sim.status_code == 200, (real.text, sim.text)
    assert missing(real.json(), sim.json()) == []
    return real.json(), sim.json()


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


# --- Where answers end (test_conformance.py) ----------------------------------------------------------
# The simulated model ends each of these at its end-of-sequence after 34 tokens (sandbox.engine.lengths);
# the random-weight real model hardly ever says end-of-sequence, so it runs to the cap.
SHORT_CHAT = [{"role": "user", "content": "Answer question 122 briefly."}]
SHORT_PROMPT = "Answer question 105 briefly."
CAP = 80
ROUTES = {
    "chat": ("/v1/chat/completions", {"messages": SHORT_CHAT, "max_tokens": CAP}),
    "completions": ("/v1/completions", {"prompt": SHORT_PROMPT, "max_tokens": CAP}),
    "messages": ("/v1/messages", {"messages": SHORT_CHAT, "max_tokens": CAP}),
    "responses": ("/v1/responses", {"input": SHORT_CHAT[0]["content"], "max_output_tokens": CAP}),
}
ANTHROPIC_REASONS = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def outcome(path: str, answer: dict[str, Any]) -> tuple[str, int]:
    """(finish reason in OpenAI's words, output tokens) of any API's answer."""
    if path == "/v1/messages":
        return ANTHROPIC_REASONS[answer["stop_reason"]], answer["usage"]["output_tokens"]
    if path == "/v1/responses":
        reason = "length" if answer["status"] == "incomplete" else "stop"
        return reason, answer["usage"]["output_tokens"]
    return answer["choices"][0]["finish_reason"], answer["usage"]["completion_tokens"]


def ask(base: str, route: str, **extra: Any) -> tuple[str, int]:
    path, body = ROUTES[route]
    response = post(base, path, {"model": MODEL_NAME, **body, **extra})
    assert response.status_code == 200, response.text
    return outcome(path, response.json())


def cut_at_cap_or_ended(result: tuple[str, int], cap: int = CAP) -> bool:
    reason, tokens = result
    return (reason == "length" and tokens == cap) or (reason == "stop" and tokens <= cap)


# --- Tool calls -----------------------------------------------------------------------------------------
# ``strict`` makes vLLM hold the arguments to the schema (without it, 0.32 constrains only the envelope);
# one call at a time (parallel calls off), so the random real model finishes its call well within the cap.
PARAMETERS = {
    "type": "object",
    "properties": {
        "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "detailed": {"type": "boolean"},
    },
    "required": ["units", "detailed"],
    "additionalProperties": False,
}
WEATHER = {"name": "get_weather", "description": "The weather where the user is.", "strict": True}
CHAT_TOOLS = [{"type": "function", "function": {**WEATHER, "parameters": PARAMETERS}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOL_CHAT = {
    "model": MODEL_NAME,
    "messages": ASK,
    "tools": CHAT_TOOLS,
    "parallel_tool_calls": False,
    "max_tokens": 400,
}
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def satisfies(arguments: Any) -> bool:
    """The arguments fill the schema: both required properties, of their types, nothing else."""
    return (
        isinstance(arguments, dict)
        and set(arguments) == {"units", "detailed"}
        and arguments["units"] in ("celsius", "fahrenheit")
        and isinstance(arguments["detailed"], bool)
    )


def chunk_kind(data: Any) -> str:
    if data == "[DONE]":
        return "done"
    if not data["choices"]:
        return "usage"
    choice = data["choices"][0]
    calls = choice["delta"].get("tool_calls") or []
    if "role" in choice["delta"]:
        return "role"
    if choice["finish_reason"]:
        return "finish"
    return ("call" if "id" in calls[0] else "arguments") if calls else "content"


MESSAGES_TOOLS = [{**WEATHER, "input_schema": PARAMETERS}]
TOOL_MESSAGES = {"model": MODEL_NAME, "messages": ASK, "tools": MESSAGES_TOOLS, "max_tokens": 400}
ANY = {"type": "any", "disable_parallel_tool_use": True}


RESPONSES_TOOLS = [{"type": "function", **WEATHER, "parameters": PARAMETERS}]
TOOL_RESPONSES = {
    "model": MODEL_NAME, "input": ASK[0]["content"], "tools": RESPONSES_TOOLS, "parallel_tool_calls": False,
    "max_output_tokens": 400,
}  # fmt: skip
