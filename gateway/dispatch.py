"""Send a request to the topology's cluster, or to its fallback (``failover``), and pass the answer
through: whole answers byte for byte, streams event by event, counting usage and timing the first
token on the way. Every answer says who served it in ``x-tandem-backend``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from gateway.bodies import read_whole
from gateway.failover import open_answer
from gateway.outcome import Outcome
from gateway.routes import RouteEntry
from gateway.sse import SseReader, StreamStats, cached_of, event_data, inspect_chunk

Send = Callable[[dict[str, Any]], Awaitable[None]]
PASSED_HEADERS = ("content-type", "retry-after", "x-request-id")


def _start(response: aiohttp.ClientResponse, outcome: Outcome) -> dict[str, Any]:
    headers = [
        (name.encode(), response.headers[name].encode())
        for name in PASSED_HEADERS
        if name in response.headers
    ]
    headers.append((b"x-tandem-backend", outcome.backend.encode()))
    if outcome.entry is not None:
        headers.append((b"x-tandem-topology", outcome.entry.topology_name.encode()))
    if outcome.stream:
        headers.append((b"cache-control", b"no-cache"))
    return {"type": "http.response.start", "status": response.status, "headers": headers}


def _count_usage(body: bytes, outcome: Outcome) -> None:
    try:
        usage = json.loads(body).get("usage") or {}
    except (ValueError, AttributeError, RecursionError):
        return
    if isinstance(usage, dict):
        outcome.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        outcome.completion_tokens = int(usage.get("completion_tokens") or 0)
        outcome.cached_tokens = cached_of(usage)


async def serve(
    path: str,
    request: dict[str, Any],
    entry: RouteEntry,
    send: Send,
    outcome: Outcome,
    *,
    raw: bytes | None = None,
) -> None:
    """OpenAI chat/completions: the answer passed through byte for byte (streams event by event)."""
    started = time.monotonic()
    outcome.stream = bool(request.get("stream"))
    client_wants_usage = True
    if outcome.stream:
        options = request.get("stream_options")
        client_wants_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        if not (isinstance(options, dict) and options.get("include_usage") is True):
            raw = None  # the request changes: it asks for usage
            request = {
                **request,
                "stream_options": {**(options if isinstance(options, dict) else {}), "include_usage": True},
            }
    response = await open_answer(path, request, entry, outcome, raw=raw)
    outcome.status = response.status
    try:
        if not outcome.stream or response.status != 200:
            body = await read_whole(response)  # a whole answer: no first token to time (no TTFT)
            _count_usage(body, outcome)
            outcome.started = True
            await send(_start(response, outcome))
            await send({"type": "http.response.body", "body": body})
            return
        outcome.started = True
        await send(_start(response, outcome))
        await relay_stream(response, send, outcome, started=started, drop_usage_chunk=not client_wants_usage)
    finally:
        response.release()


async def relay_stream(
    response: aiohttp.ClientResponse, send: Send, outcome: Outcome, *, started: float, drop_usage_chunk: bool
) -> None:
    reader = SseReader()
    stats = StreamStats()
    async for chunk in response.content.iter_any():
        out = []
        for event in reader.feed(chunk):
            data = event_data(event)
            if data is not None:
                usage_only = False
                if not stats.first_content or b'"usage"' in data or b"\\u" in data:
                    usage_only, _ = inspect_chunk(data, stats)  # else: no usage and content seen, no news
                if stats.first_content and outcome.ttft_ms is None:
                    outcome.ttft_ms = (time.monotonic() - started) * 1000
                if usage_only and drop_usage_chunk:
                    continue
            out.append(event)
        if out:
            outcome.streamed_chunks += len(out)
            await send({"type": "http.response.body", "body": b"".join(out), "more_body": True})
    await send({"type": "http.response.body", "body": reader.rest(), "more_body": False})
    outcome.prompt_tokens, outcome.completion_tokens = stats.prompt_tokens, stats.completion_tokens
    outcome.cached_tokens = stats.cached_tokens
