"""The generation routes of the simulated engines: OpenAI completions and chat, Anthropic's Messages and
the Responses API (``sandbox.engine.dialects``), streamed or not, with vLLM 0.32's context checks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web

from perfmodel.model.scheduler import Sequence
from sandbox.engine import dialects, spans, toolcalls
from sandbox.engine.engine import SimEngine
from sandbox.engine.httpbase import engine_of, json_response, read_body, unauthorized
from sandbox.engine.lengths import natural_length, output_length
from sandbox.engine.openai import (
    ChunkWriter,
    CompletionRequest,
    RequestError,
    error_body,
    full_response,
    parse_request,
    usage,
)
from sandbox.engine.tokens import block_hashes, filler, tokenize
from sandbox.engine.tools import PlannedCall, plan_call, tool_choice_problem

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


def _finish(req: CompletionRequest, seq: Sequence, call: PlannedCall | None) -> str | None:
    """The finish reason the API reports: a completed tool call is ``tool_calls`` (chat: ``stop`` for a
    named function, as vLLM)."""
    if call is None or seq.finish_reason != "stop":
        return seq.finish_reason
    return toolcalls.chat_finish(call) if req.api == "" else "tool_calls"


def _answer(
    engine: SimEngine, req: CompletionRequest, seq: Sequence, call: PlannedCall | None
) -> dict[str, Any]:
    text = "" if call else filler(0, seq.generated)
    finish = _finish(req, seq, call)
    if req.api == "messages":
        body = dialects.message_body(req, seq.request_id, text, finish, _usage(engine, seq))
        if call:
            body["content"] = [toolcalls.tool_use_block(call, toolcalls.call_id())]
        return body
    if req.api == "responses":
        writer = toolcalls.FunctionCallWriter(req, seq.request_id, call) if call else None
        return (writer or dialects.ResponseWriter(req, seq.request_id)).body(
            text, finish, _usage(engine, seq)
        )
    body = full_response(req, seq.request_id, text, finish, _usage(engine, seq), _kv_params(engine, seq))
    if call:
        body["choices"][0]["message"] = toolcalls.chat_message(call, toolcalls.call_id())
    return body


def _writer(req: CompletionRequest, seq: Sequence, call: PlannedCall | None) -> StreamWriter:
    if req.api == "messages":
        if call:
            return toolcalls.ToolUseStream(req, seq.request_id, seq.prompt_len, call)
        return dialects.MessageStream(req, seq.request_id, seq.prompt_len)
    if req.api == "responses":
        if call:
            return toolcalls.FunctionCallWriter(req, seq.request_id, call)
        return dialects.ResponseWriter(req, seq.request_id)
    if call:
        return toolcalls.ChatToolChunks(req, seq.request_id, call)
    return ChunkWriter(req, seq.request_id)


def _tool_flags(engine: SimEngine) -> tuple[bool, bool]:
    """(a tool parser is set, auto tool choice is enabled) from the engine's command line."""
    args = engine.spec.args
    parser = any(a == "--tool-call-parser" or a.startswith("--tool-call-parser=") for a in args)
    return parser, "--enable-auto-tool-choice" in args


def _plan(engine: SimEngine, req: CompletionRequest) -> PlannedCall | None:
    """The tool call to answer with. vLLM refuses, on chat and Messages, a tool choice it was not started
    for; its Responses route ignores the tools then (other engines are not held to vLLM's flags)."""
    parser, auto = _tool_flags(engine)
    refuses = engine.spec.engine == "vllm" and req.api != "responses" and req.tools
    if refuses and (problem := tool_choice_problem(req.tool_choice, parser=parser, auto_enabled=auto)):
        raise RequestError(400, problem)
    if not parser:
        return None
    return plan_call(req.tools, req.tool_choice, after_tool_result=req.after_tool_result, auto_enabled=auto)


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
        call = _plan(engine, req)
        seq = _sequence(engine, req, request.headers.get("X-Request-Id"), call)
        if call and seq.output_len < call.tokens():
            call = None  # the call does not fit under max_tokens: the model is cut off in text
    except RequestError as exc:
        return _refusal(exc, api)
    engine.inflight += 1
    try:
        engine.scheduler.submit(seq)
        if req.stream:
            return await _stream(request, engine, req, seq, call)
        while seq.state != "done":
            await seq.event.wait()
            seq.event.clear()
        if seq.finish_reason == "abort" and seq.error:
            return _refusal(RequestError(500, seq.error, kind="InternalServerError"), api)
        return json_response(_answer(engine, req, seq, call))
    finally:
        engine.inflight -= 1
        if seq.state != "done":
            engine.scheduler.abort(seq)
        spans.export_finished(engine, request, seq, body)  # with --otlp-traces-endpoint, as vLLM
        engine.maybe_log_stats()


def _sequence(
    engine: SimEngine, req: CompletionRequest, client_id: str | None = None, call: PlannedCall | None = None
) -> Sequence:
    tokens = tokenize(req.prompt)
    prompt_len = max(1, len(tokens))
    params = req.kv_transfer_params or {}
    prefill_only = engine.role == "prefill" and bool(params.get("do_remote_decode"))
    remote = params if engine.role == "decode" and params.get("do_remote_prefill") else None
    room = _room_for_output(engine.cfg.max_model_len, prompt_len, req.max_tokens)
    # vLLM's defaults: completions 16 tokens, chat what the context leaves
    cap = min(room, req.max_tokens if req.max_tokens is not None else (room if req.chat else 16))
    if prefill_only:
        output_len, on_length = 1, True
    else:
        natural = call.tokens() if call else natural_length(req.prompt, req.seed)
        length = output_length(natural=natural, cap=cap, ignore_eos=req.ignore_eos and not call,
                               min_tokens=0 if call else req.min_tokens)  # fmt: skip
        output_len, on_length = length.tokens, not length.at_eos
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


def _usage(engine: SimEngine, seq: Sequence) -> dict[str, Any]:
    """vLLM 0.32's usage: ``prompt_tokens_details`` only when started with --enable-prompt-tokens-details
    (else null), with the prefix-cache hits; a decode instance reports the prefill's hits, which the
    prefill hands over in ``kv_transfer_params.remote_prefill_cached_tokens`` (v1/core/sched/scheduler.py,
    v1/engine/output_processor.py)."""
    if "--enable-prompt-tokens-details" not in engine.spec.args:
        return usage(seq.prompt_len, seq.generated, None)
    remote = (seq.remote or {}).get("remote_prefill_cached_tokens")
    cached = remote if isinstance(remote, int) else seq.cached_tokens
    block = engine.cfg.block_size
    created = max(0, (seq.prompt_len // block) * block - seq.cached_tokens) if remote is None else 0
    return usage(
        seq.prompt_len,
        seq.generated,
        {"cached_tokens": cached, "created_cache_tokens": created, "multimodal_tokens": None},
    )


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
        "remote_prefill_cached_tokens": seq.cached_tokens,  # the P side's prefix-cache hits, for the D side
    }


def _pieces(call: PlannedCall | None) -> Callable[[int], str]:
    """The text of output token ``i``: the call's arguments (then nothing: end-of-sequence), or filler."""
    if call is None:
        return lambda i: filler(i, 1)
    pieces = call.pieces()
    return lambda i: pieces[i] if i < len(pieces) else ""


async def _stream(
    request: web.Request, engine: SimEngine, req: CompletionRequest, seq: Sequence, call: PlannedCall | None
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    writer, piece = _writer(req, seq, call), _pieces(call)
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
                chunks = [writer.delta(piece(sent + i), reason if i == new - 1 else None) for i in range(new)]
                await response.write(b"".join(chunks))
                sent = seq.generated
            if seq.state == "done":
                await response.write(writer.closing(_finish(req, seq, call), _usage(engine, seq)))
                break
        await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        engine.scheduler.abort(seq)
    return response
