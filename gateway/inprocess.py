"""Call the gateway's dispatch (cluster, fallback, breaker) in-process, as the verification probes do.

The probes run in a worker: they go through the same routing, fallback and streaming code as an
application's request, only without the HTTP hop into Tandem and without an API key.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from gateway import dispatch
from gateway.errors import GatewayError
from gateway.outcome import Outcome
from gateway.recorder import record_request
from gateway.routes import RouteEntry
from gateway.sse import SseReader, event_data


@dataclass
class Answer:
    status: int
    backend: str
    latency_ms: float
    ttft_ms: float | None
    body: dict[str, Any] | None = None
    text: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    error_code: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def force(entry: RouteEntry, backend: str | None) -> RouteEntry:
    """The route with only the cluster (no fallback) or only the fallback (no endpoint)."""
    if backend == "cluster":
        return dataclasses.replace(entry, fallback=None)
    if backend == "fallback":
        return dataclasses.replace(entry, endpoint="")
    return entry


def _leg_error(error: GatewayError, entry: RouteEntry, backend: str | None) -> str:
    """The error of a forced leg in its own words: the dispatch's message speaks of the route as the
    leg saw it (the cluster leg has no fallback, the fallback leg no endpoint), not as configured."""
    if backend == "cluster" and error.code == "cluster_unavailable" and error.reason:
        return f"the cluster failed: {error.reason}"
    if backend == "fallback" and error.code == "all_backends_down" and error.reason:
        assert entry.fallback is not None
        return f"the fallback upstream {entry.fallback.base_url} failed: {error.reason}"
    return error.message


def _record(entry: RouteEntry, outcome: Outcome, started: float) -> float:
    """A probe's request is the gateway's traffic too: recorded (flagged) like an application's."""
    latency = (time.monotonic() - started) * 1000
    record_request(
        outcome,
        key_id=None,
        model=entry.model,
        topology_id=entry.topology_id,
        endpoint="chat/completions",
        latency_ms=latency,
        probe=True,
    )
    return latency


async def chat(
    entry: RouteEntry,
    messages: list[dict[str, Any]],
    *,
    max_tokens: int = 16,
    stream: bool = False,
    backend: str | None = None,
) -> Answer:
    request: dict[str, Any] = {"model": entry.model, "messages": messages, "max_tokens": max_tokens}
    if stream:
        request["stream"] = True
        request["stream_options"] = {"include_usage": True}
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    outcome = Outcome(model=entry.model, entry=entry, probe=True)
    started = time.monotonic()
    try:
        await dispatch.serve("/v1/chat/completions", request, force(entry, backend), send, outcome)
    except GatewayError as error:
        outcome.status, outcome.error_code = error.status, error.code
        _record(entry, outcome, started)
        return Answer(
            error.status,
            outcome.backend,
            (time.monotonic() - started) * 1000,
            None,
            error=_leg_error(error, entry, backend),
            error_code=error.code,
        )
    latency = _record(entry, outcome, started)
    head: dict[str, Any] = next(
        (m for m in sent if m["type"] == "http.response.start"), {"status": 0, "headers": []}
    )
    headers = {k.decode(): v.decode() for k, v in head.get("headers", [])}
    raw = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    answer = Answer(
        int(head["status"]),
        outcome.backend,
        latency,
        outcome.ttft_ms,
        headers=headers,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
    )
    if stream and answer.status == 200:
        reader = SseReader()
        parts = []
        for event in reader.feed(raw + b"\n\n"):
            data = event_data(event)
            if not data or data == b"[DONE]":
                continue
            try:
                chunk = json.loads(data)
            except ValueError:
                continue
            for choice in chunk.get("choices") or []:
                parts.append((choice.get("delta") or {}).get("content") or "")
        answer.text = "".join(parts)
        return answer
    try:
        answer.body = json.loads(raw)
    except ValueError:
        answer.error = f"the answer is not JSON: {raw[:200]!r}"
        return answer
    if answer.status != 200:
        problem = (answer.body or {}).get("error") if isinstance(answer.body, dict) else None
        answer.error = str(problem.get("message") if isinstance(problem, dict) else raw[:300])
        return answer
    choices = (answer.body or {}).get("choices") if isinstance(answer.body, dict) else None
    if choices:
        answer.text = str((choices[0].get("message") or {}).get("content") or "")
    return answer
