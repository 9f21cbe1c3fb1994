"""The generation routes of the simulated engines: OpenAI completions and chat, Anthropic's Messages and
the Responses API (``sandbox.engine.dialects``), streamed or not, with vLLM 0.32's context checks."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from aiohttp import web

from sandbox.engine import dialects
from sandbox.engine.engine import SimEngine
from sandbox.engine.httpbase import engine_of, json_response, read_body, unauthorized
from sandbox.engine.openai import (
    ChunkWriter,
    CompletionRequest,
    RequestError,
    error_body,
    full_response,
    natural_length,
    parse_request,
    usage,
)
from sandbox.engine.scheduler import Sequence
from sandbox.engine.tokens import block_hashes, filler, tokenize

_NON_JSON_BODY = (
    "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
)


class StreamWriter(Protocol):
    """Writes one API's event stream: ChunkWriter (OpenAI), MessageStream, ResponseWriter (dialects)."""

    def opening(self) -> bytes: ...
    def delta(self, text: str, finish: str | None) -> bytes: ...
    def closing(self, finish: str | None, usage: dict[str, Any]) -> bytes: ...
    def error(self, status: int, message: str) -> bytes: ...


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "completions")


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "chat")


async def anthropic_messages(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "messages")


async def responses(request: web.Request) -> web.StreamResponse:
    return await _generate(request, "responses")


def _parse(body: Any, api: str, served: tuple[str, ...]) -> CompletionRequest:
    if api == "messages":
        return dialects.parse_messages(body, served)
    if api == "responses":
        return dialects.parse_responses(body, served)
    return parse_request(body, api == "chat", served)


def _refusal(exc: RequestError, api: str) -> web.Response:
    if api == "messages":
        return json_response(dialects.anthropic_error(exc.status, str(exc), exc.kind), exc.status)
    return json_response(exc.body(), exc.status)


def _answer(engine: SimEngine, req: CompletionRequest, seq: Sequence) -> dict[str, Any]:
    text = filler(0, seq.generated)
    if req.api == "messages":
        return dialects.message_body(req, seq.request_id, text, seq.finish_reason, _usage(seq))
    if req.api == "responses":
        return dialects.ResponseWriter(req, seq.request_id).body(text, seq.finish_reason, _usage(seq))
    return full_response(req, seq.request_id, text, seq.finish_reason, _usage(seq), _kv_params(engine, seq))


def _writer(req: CompletionRequest, seq: Sequence) -> StreamWriter:
    if req.api == "messages":
        return dialects.MessageStream(req, seq.request_id, seq.prompt_len)
    if req.api == "responses":
        return dialects.ResponseWriter(req, seq.request_id)
    return ChunkWriter(req, seq.request_id)


async def _generate(request: web.Request, api: str) -> web.StreamResponse:
    engine = engine_of(request)
    if engine.draining or not engine.loaded():
        return json_response(
            error_body(503, "The engine is not accepting requests.", "ServiceUnavailableError"), 503
        )
    refused = unauthorized(engine, request)
    if refused is not None:
        return refused
    delay = engine.faults.delay_seconds("inference")
    if delay:
        await asyncio.sleep(delay)
    fault = engine.faults.http_fault()
    if fault is not None:
        engine.stats.failed_requests += 1  # MindIE's request_failed_total counts every failed answer
        if fault.kind == "http_401":
            return json_response({"error": "Unauthorized"}, 401)
        if fault.kind == "http_429":
            response = json_response(
                error_body(429, "Rate limit reached; retry later.", "RateLimitError"), 429
            )
            response.headers["Retry-After"] = "1"
            return response
        if fault.kind == "non_json":
            return web.Response(text=_NON_JSON_BODY, status=200, content_type="text/html")
        return json_response(
            error_body(fault.status, "Internal server error (injected fault)", "InternalServerError"),
            fault.status,
        )
    body = await read_body(request)
    named = (engine.spec.model, *[a for a in engine.spec.args[:1] if not a.startswith("-")])
    served = tuple(dict.fromkeys(named))
    try:
        req = _parse(body, api, served)
        seq = _sequence(engine, req, request.headers.get("X-Request-Id"))
    except RequestError as exc:
        return _refusal(exc, api)
    engine.inflight += 1
    try:
        engine.scheduler.submit(seq)
        if req.stream:
            return await _stream(request, engine, req, seq)
        while seq.state != "done":
            await seq.event.wait()
            seq.event.clear()
        if seq.finish_reason == "abort" and seq.error:
            return _refusal(RequestError(500, seq.error, kind="InternalServerError"), api)
        return json_response(_answer(engine, req, seq))
    finally:
        engine.inflight -= 1
        if seq.state != "done":
            engine.scheduler.abort(seq)
        engine.maybe_log_stats()


def _sequence(engine: SimEngine, req: CompletionRequest, client_id: str | None = None) -> Sequence:
    tokens = tokenize(req.prompt)
    prompt_len = max(1, len(tokens))
    params = req.kv_transfer_params or {}
    prefill_only = engine.role == "prefill" and bool(params.get("do_remote_decode"))
    remote = params if engine.role == "decode" and params.get("do_remote_prefill") else None
    if prefill_only:
        output_len, on_length = 1, True
    elif req.max_tokens is not None:
        output_len, on_length = req.max_tokens, True
    else:
        output_len, on_length = (16, True) if not req.chat else (natural_length(req.prompt), False)
    output_len = min(output_len, _room_for_output(engine.cfg.max_model_len, prompt_len, req.max_tokens))
    return Sequence(
        request_id=engine.request_id("chatcmpl" if req.chat else "cmpl", client_id),
        prompt_len=prompt_len,
        hashes=block_hashes(tokens, engine.cfg.block_size),
        output_len=output_len,
        finish_on_length=on_length,
        remote=remote,
        prefill_only=prefill_only,
    )


def _room_for_output(limit: int, prompt_len: int, max_tokens: int | None) -> int:
    """vLLM 0.32's checks (``renderers/params.py``, ``get_max_tokens``): ``max_tokens`` over the context and
    a prompt over the context are refused, with its words; a prompt and ``max_tokens`` that together
    exceed it are served, ``max_tokens`` clamped to what is left (the answer ends with ``length``)."""
    if max_tokens is not None and max_tokens > limit:
        raise RequestError(
            400,
            f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. Please request fewer "
            f"output tokens. (parameter=max_tokens, value={max_tokens})",
            "max_tokens",
        )
    if prompt_len > limit:
        counted = limit + 1  # vLLM's tokenizer stops at one token over: it says "at least"
        raise RequestError(
            400,
            f"This model's maximum context length is {limit} tokens. However, your prompt contains at least "
            f"{counted} input tokens, which exceeds this limit even without any output tokens. Please reduce "
            f"the length of the input prompt. (parameter=input_tokens, value={counted})",
            "input_tokens",
        )
    return max(1, limit - prompt_len)


def _usage(seq: Sequence) -> dict[str, Any]:
    return usage(seq.prompt_len, seq.generated, seq.cached_tokens)


def _kv_params(engine: SimEngine, seq: Sequence) -> dict[str, Any] | None:
    if not seq.prefill_only:
        return None
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": engine.name,
        "remote_host": engine.ip,
        "remote_port": engine.port,
        "remote_block_ids": list(range(engine.scheduler.blocks_for(seq.prompt_len))),
        "request_id": seq.request_id,
        "tp_size": 1,
    }


async def _stream(
    request: web.Request, engine: SimEngine, req: CompletionRequest, seq: Sequence
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    writer = _writer(req, seq)
    sent = 0
    try:
        await response.write(writer.opening())
        while True:
            await seq.event.wait()
            seq.event.clear()
            if seq.finish_reason == "abort" and seq.error:
                await response.write(writer.error(500, seq.error))
                break
            new = seq.generated - sent
            if new > 0:
                reason = seq.finish_reason if seq.state == "done" else None
                chunks = [
                    writer.delta(filler(sent + i, 1), reason if i == new - 1 else None) for i in range(new)
                ]
                await response.write(b"".join(chunks))
                sent = seq.generated
            if seq.state == "done":
                await response.write(writer.closing(seq.finish_reason, _usage(seq)))
                break
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        engine.scheduler.abort(seq)
    return response
