"""``POST /v1/responses``: to the engine's own endpoint when it serves one, else translated.

How the gateway knows whether the cluster serves ``/v1/responses``: by its engine, then by asking. A
topology on vLLM or vLLM-Ascend (``RouteEntry.responses_passthrough``) gets the request on its own
``/v1/responses``, passed through but for the hosted tools it cannot run. The router in front of the
engines may not serve that path (vLLM's disaggregation proxy and the sandbox's router serve only the
completions paths): a 404 or 405 from the cluster marks its endpoint as not serving it for
``UNSERVED_SECONDS`` and the same request is translated at once. SGLang and MindIE clusters, requests
with namespaced tools, and every fallback (whose contract is chat completions) get it translated to
``/v1/chat/completions`` and the answer written back as a Response. ``x-tandem-responses`` says which
happened.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from gateway.bodies import read_whole
from gateway.failover import open_answer
from gateway.outcome import Outcome
from gateway.responses.answer import Shell, from_chat
from gateway.responses.request import for_passthrough, to_chat
from gateway.responses.stream import StreamTranslator
from gateway.routes import RouteEntry
from gateway.sse import SseReader, chat_chunks, event_data, event_type

Send = Callable[[dict[str, Any]], Awaitable[None]]
CHAT, RESPONSES = "/v1/chat/completions", "/v1/responses"
ENDINGS = frozenset((b"response.completed", b"response.incomplete", b"response.failed"))
UNSERVED_SECONDS = 600.0
_unserved: dict[str, float] = {}  # endpoint -> until when it is known not to serve /v1/responses


def _passes(entry: RouteEntry) -> bool:
    if not entry.responses_passthrough or not entry.endpoint:
        return False
    until = _unserved.get(entry.endpoint)
    return until is None or until < time.monotonic()


def _headers(outcome: Outcome, entry: RouteEntry, mode: str, dropped: list[str]) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"x-tandem-backend", outcome.backend.encode()),
        (b"x-tandem-topology", entry.topology_name.encode()),
        (b"x-tandem-responses", mode.encode()),
    ]
    if dropped:
        headers.append((b"x-tandem-dropped-tools", ", ".join(sorted(set(dropped))).encode()))
    return headers


def _count(usage: Any, outcome: Outcome) -> None:
    if isinstance(usage, dict):
        outcome.prompt_tokens = int(usage.get("input_tokens") or 0)
        outcome.completion_tokens = int(usage.get("output_tokens") or 0)


@dataclass
class _Reply:
    """What writing the answer needs: the request, the names to map back, where it goes."""

    request: dict[str, Any]
    namespaces: dict[str, tuple[str, str]]
    send: Send
    outcome: Outcome
    headers: list[tuple[bytes, bytes]]
    started: float

    def shell(self) -> Shell:
        return Shell(self.request, str(self.request["model"]))

    def first_byte(self) -> None:
        if self.outcome.ttft_ms is None:
            self.outcome.ttft_ms = (time.monotonic() - self.started) * 1000


async def serve(
    request: dict[str, Any], entry: RouteEntry, send: Send, outcome: Outcome, *, raw: bytes | None = None
) -> None:
    """`raw` is the caller's body, sent as it came when the passthrough changes nothing in it."""
    prepared = to_chat(request)  # checks the request (errors name the field) and is the fallback's request
    outcome.stream = bool(request.get("stream"))
    passing = for_passthrough(request) if _passes(entry) else None
    started = time.monotonic()
    if passing is not None:
        body, dropped = passing
        unchanged = raw if body is request else None
        response = await open_answer(
            RESPONSES, body, entry, outcome, raw=unchanged, fallback=(CHAT, prepared.chat)
        )
        if outcome.backend == "cluster" and response.status in (404, 405):
            response.release()  # the cluster does not serve the path: ask it in chat completions
            _unserved[entry.endpoint] = time.monotonic() + UNSERVED_SECONDS
            passing = None
    if passing is None:
        dropped = prepared.dropped_tools
        response = await open_answer(CHAT, prepared.chat, entry, outcome)
    outcome.status = response.status
    mode = "passthrough" if passing is not None and outcome.backend == "cluster" else "translated"
    headers = _headers(outcome, entry, mode, dropped or prepared.dropped_tools)
    reply = _Reply(request, prepared.namespaces, send, outcome, headers, started)
    try:
        if response.status != 200 or not outcome.stream:
            await _whole(response, reply, translate=mode == "translated")
        elif mode == "passthrough":
            await _relay(response, reply)
        else:
            await _translate(response, reply)
    finally:
        response.release()


async def _whole(response: aiohttp.ClientResponse, reply: _Reply, *, translate: bool) -> None:
    """A whole answer, or an upstream error (OpenAI's error body on both paths: passed as it came)."""
    body = await read_whole(response)  # whole: no first token, no TTFT
    if response.status == 200 and translate:
        answer = from_chat(json.loads(body), reply.shell(), reply.namespaces)
        body = json.dumps(answer).encode()
        _count(answer["usage"], reply.outcome)
    elif response.status == 200:
        with contextlib.suppress(ValueError, AttributeError):
            _count(json.loads(body).get("usage"), reply.outcome)
    content_type = response.headers.get("content-type", "application/json").encode()
    reply.outcome.started = True
    start = [(b"content-type", content_type), *reply.headers]
    await reply.send({"type": "http.response.start", "status": response.status, "headers": start})
    await reply.send({"type": "http.response.body", "body": body})


async def _open_stream(reply: _Reply) -> None:
    reply.outcome.started = True
    start = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), *reply.headers]
    await reply.send({"type": "http.response.start", "status": 200, "headers": start})


async def _relay(response: aiohttp.ClientResponse, reply: _Reply) -> None:
    """The engine's own event stream, passed through event by event; usage read from its last event."""
    await _open_stream(reply)
    reader = SseReader()
    async for piece in response.content.iter_any():
        events = reader.feed(piece)
        for event in events:
            kind = _kind(event)
            if kind.endswith(b".delta"):
                reply.first_byte()
                reply.outcome.streamed_chunks += 1
            elif kind in ENDINGS:
                with contextlib.suppress(ValueError, AttributeError):
                    data = json.loads(event_data(event) or b"{}")
                    _count((data.get("response") or {}).get("usage"), reply.outcome)
        if events:
            await reply.send({"type": "http.response.body", "body": b"".join(events), "more_body": True})
    await reply.send({"type": "http.response.body", "body": reader.rest(), "more_body": False})


def _kind(event: bytes) -> bytes:
    """An event's type: from its `event:` line (as vLLM and OpenAI write them), else from its data."""
    kind = event_type(event)
    if kind or not event.startswith(b"data:"):
        return kind
    try:
        found = json.loads(event_data(event) or b"{}").get("type")
    except (ValueError, AttributeError, RecursionError):
        return b""
    return found.encode() if isinstance(found, str) else b""


async def _translate(response: aiohttp.ClientResponse, reply: _Reply) -> None:
    translator = StreamTranslator(reply.shell(), reply.namespaces)
    await _open_stream(reply)
    await reply.send({"type": "http.response.body", "body": translator.start(), "more_body": True})
    reader = SseReader()
    ended = False
    try:
        async for piece in response.content.iter_any():
            chunks, done = chat_chunks(reader, piece)
            reply.outcome.streamed_chunks += len(chunks)
            ended = ended or done
            out = b"".join(translator.chunk(chunk) for chunk in chunks)
            _count(translator.usage, reply.outcome)
            if out:
                if translator.content_seen:
                    reply.first_byte()
                await reply.send({"type": "http.response.body", "body": out, "more_body": True})
    except aiohttp.ClientError:
        ended = False
    if ended or translator.finish is not None:
        closing = translator.finish_stream()
    else:
        reply.outcome.error_code = "upstream_broke_off"
        closing = translator.fail("The upstream ended the stream before the answer was complete.")
    await reply.send({"type": "http.response.body", "body": closing, "more_body": False})
