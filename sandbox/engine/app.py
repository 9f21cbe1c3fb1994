"""The engines' HTTP surface. One aiohttp application serves every engine in the farm; the listening
socket a request arrived on (its local ip:port) picks the engine, so an engine costs one socket and
its state — no per-engine application, thread or runner.

Routes per engine: `GET /health`, `GET /metrics`, `GET /v1/models`, `POST /v1/completions`,
`POST /v1/chat/completions` (streaming or not, with `usage`), Anthropic's `POST /v1/messages` and
the Responses API's `POST /v1/responses` (`dialects`, as vLLM 0.32 serves them), `POST /kv/switch_role`,
MindIE's
management routes `POST /v1/role/{role}` and `GET /v1/status` (`mindie_role`), SGLang's
`POST /pd_role_switch` and `GET /server_info` (`sglang_role`; each 404 on other engines), and the
sandbox's control interface (never read by Tandem: real engines have no such routes)
`GET|POST|DELETE /sandbox/faults`, `GET /sandbox/info` and the LLM-DataDist link table
`GET|POST /sandbox/kv/links`, `DELETE /sandbox/kv/links/{peer}` (what `link_clusters` /
`unlink_clusters` would do, for tests and the `fault --show` command).

Every answer (but `/metrics`, `/health` and the control routes) is counted in
`http_requests_total{handler,method,status}` the way vLLM's API server counts them
(prometheus-fastapi-instrumentator with vLLM's excluded handlers, status grouped as `2xx`, `4xx`,
`5xx`), including the answers of injected HTTP faults; a client's `X-Request-Id` becomes the
request id (`cmpl-<id>-0`), as in vLLM, so its KV-connector log lines can be traced.

P/D requests follow vLLM's disaggregated-serving protocol: the router sends the prompt to a prefill
instance with `"kv_transfer_params": {"do_remote_decode": true}` and `max_tokens: 1`; the answer
carries `kv_transfer_params` (`remote_engine_id`, `remote_host`, `remote_port`, `remote_block_ids`,
`request_id`) which the router passes to a decode instance, whose engine pulls the KV over its link.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Protocol

from aiohttp import web

from sandbox.engine import dialects, mindie_role, sglang_role
from sandbox.engine import links as L
from sandbox.engine.engine import ROLES, SimEngine
from sandbox.engine.faults import FaultError, parse_fault
from sandbox.engine.openai import (
    VLLM_VERSION,
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

EngineResolver = Callable[[web.Request], SimEngine | None]


class StreamWriter(Protocol):
    """Writes one API's event stream: ChunkWriter (OpenAI), MessageStream, ResponseWriter (dialects)."""

    def opening(self) -> bytes: ...
    def delta(self, text: str, finish: str | None) -> bytes: ...
    def closing(self, finish: str | None, usage: dict[str, Any]) -> bytes: ...
    def error(self, status: int, message: str) -> bytes: ...


CrashHandler = Callable[[SimEngine], None]
ENGINE_RESOLVER: web.AppKey[EngineResolver] = web.AppKey("engine_resolver")
CRASH_HANDLER: web.AppKey[CrashHandler] = web.AppKey("crash_handler")
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_NON_JSON_BODY = (
    "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
)


# vLLM's API server instruments every route but these (excluded_handlers in its Instrumentator set-up)
UNCOUNTED_HANDLERS = frozenset({"/metrics", "/health", "/load", "/ping", "/version", "/server_info"})


@web.middleware
async def count_http(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """vLLM's `http_requests_total{handler,method,status}`: every answer, grouped by status class."""
    status = 500
    try:
        response: web.StreamResponse = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        path = request.path
        if not path.startswith("/sandbox/") and path not in UNCOUNTED_HANDLERS:
            engine = request.app[ENGINE_RESOLVER](request)
            if engine is not None:
                engine.stats.count_http(path, request.method, status)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def _engine(request: web.Request) -> SimEngine:
    engine = request.app[ENGINE_RESOLVER](request)
    if engine is None or engine.crashed:
        raise web.HTTPServiceUnavailable(
            text=json.dumps(error_body(503, "engine is not running", "ServiceUnavailableError")),
            content_type="application/json",
            headers={"Connection": "close"},
        )
    return engine


async def _body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise web.HTTPBadRequest(
            text=json.dumps(error_body(400, "The request body is not valid JSON.", "BadRequestError")),
            content_type="application/json",
        ) from None


async def health(request: web.Request) -> web.Response:
    engine = _engine(request)
    if not engine.healthy():
        return web.Response(status=503, text="")
    return web.Response(status=200, text="")


async def metrics(request: web.Request) -> web.Response:
    engine = _engine(request)
    delay = engine.faults.delay_seconds("metrics")
    if delay:
        await asyncio.sleep(delay)
    if not engine.monitored:
        return web.Response(status=404, text="Not Found")
    return web.Response(
        body=engine.metrics_text().encode(), headers={"Content-Type": PROMETHEUS_CONTENT_TYPE}
    )


def _unauthorized(engine: SimEngine, request: web.Request) -> web.Response | None:
    if engine.api_key is None:
        return None
    if request.headers.get("Authorization", "") == f"Bearer {engine.api_key}":
        return None
    return _json({"error": "Unauthorized"}, 401)


async def version(request: web.Request) -> web.Response:
    _engine(request)
    return _json({"version": VLLM_VERSION})


async def models(request: web.Request) -> web.Response:
    engine = _engine(request)
    refused = _unauthorized(engine, request)
    if refused is not None:
        return refused
    card = {
        "id": engine.spec.model,
        "object": "model",
        "created": int(engine.started),
        "owned_by": engine.spec.engine,
        "root": engine.spec.model,
        "parent": None,
        "max_model_len": engine.cfg.max_model_len,
    }
    return _json({"object": "list", "data": [card]})


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
        return _json(dialects.anthropic_error(exc.status, str(exc), exc.kind), exc.status)
    return _json(exc.body(), exc.status)


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
    engine = _engine(request)
    if engine.draining or not engine.loaded():
        return _json(error_body(503, "The engine is not accepting requests.", "ServiceUnavailableError"), 503)
    refused = _unauthorized(engine, request)
    if refused is not None:
        return refused
    delay = engine.faults.delay_seconds("inference")
    if delay:
        await asyncio.sleep(delay)
    fault = engine.faults.http_fault()
    if fault is not None:
        engine.stats.failed_requests += 1  # MindIE's request_failed_total counts every failed answer
        if fault.kind == "http_401":
            return _json({"error": "Unauthorized"}, 401)
        if fault.kind == "http_429":
            response = _json(error_body(429, "Rate limit reached; retry later.", "RateLimitError"), 429)
            response.headers["Retry-After"] = "1"
            return response
        if fault.kind == "non_json":
            return web.Response(text=_NON_JSON_BODY, status=200, content_type="text/html")
        return _json(
            error_body(fault.status, "Internal server error (injected fault)", "InternalServerError"),
            fault.status,
        )
    body = await _body(request)
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
        return _json(_answer(engine, req, seq))
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


# --- admin: links, role, faults, info -------------------------------------------------------------
async def get_links(request: web.Request) -> web.Response:
    return _json(_engine(request).link_table())


async def post_links(request: web.Request) -> web.Response:
    engine = _engine(request)
    body = await _body(request)
    raw = body.get("peers") if isinstance(body, dict) else None
    if not isinstance(raw, list) or not raw:
        return _json(
            {
                "error": {
                    "field": "peers",
                    "message": "peers must be a non-empty list of prefill pod names "
                    'or ip:port addresses, e.g. {"peers": ["prefill-0"]}',
                }
            },
            400,
        )
    targets: list[str] = []
    for item in raw:
        if isinstance(item, str):
            targets.append(item)
        elif isinstance(item, dict) and (item.get("pod") or item.get("address")):
            targets.append(str(item.get("pod") or item.get("address")))
        else:
            return _json(
                {"error": {"field": "peers", "message": f"{item!r} is neither a pod name nor ip:port"}}, 400
            )
    timeout_ms = body.get("timeout_ms", 3000)
    if not isinstance(timeout_ms, int | float) or timeout_ms <= 0:
        return _json(
            {"error": {"field": "timeout_ms", "message": "timeout_ms must be a positive number"}}, 400
        )
    ret, results = await engine.link_to(targets, float(timeout_ms))
    status = 409 if ret == L.LLM_FEATURE_NOT_ENABLED else 200
    return _json({"ret": ret, "results": results}, status)


async def delete_link(request: web.Request) -> web.Response:
    engine = _engine(request)
    peer = request.match_info["peer"]
    if not engine.unlink(peer):
        return _json({"ret": L.LLM_NOT_YET_LINK, "message": f"no link to {peer}"}, 404)
    return _json({"ret": L.LLM_SUCCESS})


async def switch_role(request: web.Request) -> web.Response:
    engine = _engine(request)
    body = await _body(request)
    role = body.get("role") if isinstance(body, dict) else None
    if role not in ROLES:
        return _json({"error": {"field": "role", "message": 'role must be "prefill" or "decode"'}}, 400)
    options = body.get("options") or {}
    if not isinstance(options, dict):
        return _json({"error": {"field": "options", "message": "options must be an object"}}, 400)
    if engine.family == "llm-datadist" and role == "prefill" and role != engine.role:
        listen = str(options.get("llm.listenIpInfo") or "")
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            message = (
                'switching to prefill (PROMPT) needs options {"llm.listenIpInfo": "<ip>:<port>"}, '
                f"the address this instance accepts KV links on, e.g. {engine.ip}:26000"
            )
            return _json({"ret": "LLM_PARAM_INVALID", "error": {"field": "options", "message": message}}, 400)
    status, answer = engine.switch_role(str(role))
    return _json(answer, status)


def _on_engine(handler: Callable[[web.Request, SimEngine], Any]) -> Callable[[web.Request], Any]:
    async def route(request: web.Request) -> web.StreamResponse:
        return await handler(request, _engine(request))

    return route


async def get_faults(request: web.Request) -> web.Response:
    engine = _engine(request)
    return _json({"faults": [f.as_dict() for f in engine.faults.faults]})


async def post_fault(request: web.Request) -> web.Response:
    engine = _engine(request)
    try:
        fault = parse_fault(await _body(request))
    except FaultError as exc:
        return _json({"error": {"field": exc.field, "message": str(exc)}}, 400)
    engine.log(f"sandbox fault injected: {json.dumps(fault.as_dict())}", "WARNING", "sandbox")
    if fault.kind == "crash":
        engine.crash()
        request.app[CRASH_HANDLER](engine)
        return _json({"faults": [fault.as_dict()]}, 202)
    engine.faults.add(fault)
    return _json({"faults": [f.as_dict() for f in engine.faults.faults]}, 201)


async def delete_faults(request: web.Request) -> web.Response:
    engine = _engine(request)
    removed = engine.faults.clear(request.query.get("kind"), request.query.get("peer"))
    engine.log(f"sandbox faults cleared: {removed}", "WARNING", "sandbox")
    return _json({"removed": removed, "faults": [f.as_dict() for f in engine.faults.faults]})


async def info(request: web.Request) -> web.Response:
    engine = _engine(request)
    return _json(
        {
            "pod": engine.pod_key,
            "address": engine.address,
            "engine": engine.spec.engine,
            "role": engine.role,
            "model": engine.spec.model,
            "kv_connector": engine.spec.kv_connector,
            "mooncake_master": engine.spec.mooncake_master,
            "perf": asdict(engine.cfg),
            "inflight": engine.inflight,
            "healthy": engine.healthy(),
        }
    )


def build_app(resolver: EngineResolver, on_crash: CrashHandler) -> web.Application:
    app = web.Application(client_max_size=32 * 1024 * 1024, middlewares=[count_http])
    app[ENGINE_RESOLVER] = resolver
    app[CRASH_HANDLER] = on_crash
    app.router.add_get("/health", health)
    app.router.add_get("/health_generate", health)  # SGLang's deeper health check
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/messages", anthropic_messages)
    app.router.add_post("/v1/responses", responses)
    app.router.add_get("/sandbox/kv/links", get_links)
    app.router.add_post("/sandbox/kv/links", post_links)
    app.router.add_delete("/sandbox/kv/links/{peer}", delete_link)
    app.router.add_post("/kv/switch_role", switch_role)
    app.router.add_post("/v1/role/{role}", _on_engine(mindie_role.post_role))
    app.router.add_get("/v1/status", _on_engine(mindie_role.get_status))
    app.router.add_post("/pd_role_switch", _on_engine(sglang_role.pd_role_switch))
    app.router.add_get("/server_info", _on_engine(sglang_role.server_info))
    app.router.add_get("/sandbox/faults", get_faults)
    app.router.add_post("/sandbox/faults", post_fault)
    app.router.add_delete("/sandbox/faults", delete_faults)
    app.router.add_get("/sandbox/info", info)
    return app
