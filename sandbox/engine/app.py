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
from typing import Any

from aiohttp import web

from sandbox.engine import links as L
from sandbox.engine import mindie_role, sglang_role
from sandbox.engine.engine import ROLES, SimEngine
from sandbox.engine.faults import FaultError, parse_fault
from sandbox.engine.generate import anthropic_messages, chat_completions, completions, responses
from sandbox.engine.httpbase import (
    CRASH_HANDLER,
    ENGINE_RESOLVER,
    CrashHandler,
    EngineResolver,
    engine_of,
    json_response,
    read_body,
    unauthorized,
)
from sandbox.engine.openai import VLLM_VERSION
from sandbox.engine.planes import ALL, PLANE_RESOLVER, TENT, PlaneResolver, plane_guard

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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


async def health(request: web.Request) -> web.Response:
    engine = engine_of(request)
    if not engine.healthy():
        return web.Response(status=503, text="")
    return web.Response(status=200, text="")


async def metrics(request: web.Request) -> web.Response:
    engine = engine_of(request)
    if TENT in request.app[PLANE_RESOLVER](request):  # Mooncake's transfer engine's own port
        return web.Response(
            body=engine.tent.render().encode(), headers={"Content-Type": PROMETHEUS_CONTENT_TYPE}
        )
    delay = engine.faults.delay_seconds("metrics")
    if delay:
        await asyncio.sleep(delay)
    if not engine.monitored:  # MindIE-LLM http_handler.cpp GetPrometheusMetrics
        return json_response(
            {
                "error": "Environment variable MIES_SERVICE_MONITOR_MODE is not set.",
                "error_type": "Incomplete Generation",
            },
            500,
        )
    return web.Response(
        body=engine.metrics_text().encode(), headers={"Content-Type": PROMETHEUS_CONTENT_TYPE}
    )


async def version(request: web.Request) -> web.Response:
    engine_of(request)
    return json_response({"version": VLLM_VERSION})


async def models(request: web.Request) -> web.Response:
    engine = engine_of(request)
    refused = unauthorized(engine, request)
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
    return json_response({"object": "list", "data": [card]})


# --- admin: links, role, faults, info -------------------------------------------------------------
async def get_links(request: web.Request) -> web.Response:
    return json_response(engine_of(request).link_table())


async def post_links(request: web.Request) -> web.Response:
    engine = engine_of(request)
    body = await read_body(request)
    raw = body.get("peers") if isinstance(body, dict) else None
    if not isinstance(raw, list) or not raw:
        return json_response(
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
            return json_response(
                {"error": {"field": "peers", "message": f"{item!r} is neither a pod name nor ip:port"}}, 400
            )
    timeout_ms = body.get("timeout_ms", 3000)
    if not isinstance(timeout_ms, int | float) or timeout_ms <= 0:
        return json_response(
            {"error": {"field": "timeout_ms", "message": "timeout_ms must be a positive number"}}, 400
        )
    ret, results = await engine.link_to(targets, float(timeout_ms))
    status = 409 if ret == L.LLM_FEATURE_NOT_ENABLED else 200
    return json_response({"ret": ret, "results": results}, status)


async def delete_link(request: web.Request) -> web.Response:
    engine = engine_of(request)
    peer = request.match_info["peer"]
    if not engine.unlink(peer):
        return json_response({"ret": L.LLM_NOT_YET_LINK, "message": f"no link to {peer}"}, 404)
    return json_response({"ret": L.LLM_SUCCESS})


async def switch_role(request: web.Request) -> web.Response:
    engine = engine_of(request)
    body = await read_body(request)
    role = body.get("role") if isinstance(body, dict) else None
    if role not in ROLES:
        return json_response(
            {"error": {"field": "role", "message": 'role must be "prefill" or "decode"'}}, 400
        )
    options = body.get("options") or {}
    if not isinstance(options, dict):
        return json_response({"error": {"field": "options", "message": "options must be an object"}}, 400)
    if engine.family == "llm-datadist" and role == "prefill" and role != engine.role:
        listen = str(options.get("llm.listenIpInfo") or "")
        host, _, port = listen.rpartition(":")
        if not host or not port.isdigit():
            message = (
                'switching to prefill (PROMPT) needs options {"llm.listenIpInfo": "<ip>:<port>"}, '
                f"the address this instance accepts KV links on, e.g. {engine.ip}:26000"
            )
            return json_response(
                {"ret": "LLM_PARAM_INVALID", "error": {"field": "options", "message": message}}, 400
            )
    status, answer = engine.switch_role(str(role))
    return json_response(answer, status)


def _on_engine(handler: Callable[[web.Request, SimEngine], Any]) -> Callable[[web.Request], Any]:
    async def route(request: web.Request) -> web.StreamResponse:
        return await handler(request, engine_of(request))

    return route


async def get_faults(request: web.Request) -> web.Response:
    engine = engine_of(request)
    return json_response({"faults": [f.as_dict() for f in engine.faults.faults]})


async def post_fault(request: web.Request) -> web.Response:
    engine = engine_of(request)
    try:
        fault = parse_fault(await read_body(request))
    except FaultError as exc:
        return json_response({"error": {"field": exc.field, "message": str(exc)}}, 400)
    engine.log(f"sandbox fault injected: {json.dumps(fault.as_dict())}", "WARNING", "sandbox")
    if fault.kind == "crash":
        engine.crash()
        request.app[CRASH_HANDLER](engine)
        return json_response({"faults": [fault.as_dict()]}, 202)
    engine.faults.add(fault)
    return json_response({"faults": [f.as_dict() for f in engine.faults.faults]}, 201)


async def delete_faults(request: web.Request) -> web.Response:
    engine = engine_of(request)
    removed = engine.faults.clear(request.query.get("kind"), request.query.get("peer"))
    engine.log(f"sandbox faults cleared: {removed}", "WARNING", "sandbox")
    return json_response({"removed": removed, "faults": [f.as_dict() for f in engine.faults.faults]})


async def info(request: web.Request) -> web.Response:
    engine = engine_of(request)
    return json_response(
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


def build_app(
    resolver: EngineResolver, on_crash: CrashHandler, planes: PlaneResolver | None = None
) -> web.Application:
    app = web.Application(client_max_size=32 * 1024 * 1024, middlewares=[count_http, plane_guard])
    app[ENGINE_RESOLVER] = resolver
    app[PLANE_RESOLVER] = planes or (lambda request: ALL)
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
