"""The OpenAI-compatible gateway: a lean ASGI app under /v1/, outside Django's middleware stack.

Per request: the key from memory and one Redis round trip for its limits (keys.hotpath_async),
the route from memory (gateway.routes), one pooled keep-alive connection to the cluster's serving
endpoint, the answer's bytes passed through as they arrive, and the record written later in a
batch (gateway.recorder). No database query on the request path once keys and routes are warm.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
from django.conf import settings

from gateway import anthropic, cancel, dispatch, incoming, key_events, reserve, tokencount, tracecontext
from gateway.admission import admitted, speculate, stop
from gateway.errors import GatewayError, anthropic_body, openai_body
from gateway.outcome import Outcome
from gateway.prefixgroup import prefix_group
from gateway.recorder import record_request
from gateway.responses import serve as responses
from gateway.routes import RouteEntry, RouteTable, current, peek
from keys.hotpath_async import AsyncGrant, authenticate, reconcile_now
from keys.records import KeyRecord
from keys.scopes import Scope
from keys.speculation import admit_early
from traces import gatewayspans
from traces import receiver as traces_receiver

logger = logging.getLogger(__name__)
Scope_ = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
JSON = [(b"content-type", b"application/json")]
CHAT, COMPLETIONS, MESSAGES, MODELS = "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/models"
RESPONSES, COUNT_TOKENS = "/v1/responses", "/v1/messages/count_tokens"
KNOWN = {
    MODELS: "GET",
    CHAT: "POST",
    COMPLETIONS: "POST",
    MESSAGES: "POST",
    RESPONSES: "POST",
    COUNT_TOKENS: "POST",
}
# Paths of an SDK whose base URL lacks /v1 (`http://host` instead of `http://host/v1`): the ASGI
# router sends them here for a JSON 404 that says so (controlplane.asgi), not Django's HTML one.
MISSING_V1 = frozenset(path.removeprefix("/v1") for path in KNOWN) | {"/embeddings"}


def missing_v1(path: str) -> bool:
    return path.rstrip("/") in MISSING_V1


def _unknown_path(path: str) -> GatewayError:
    if path in MISSING_V1:
        return GatewayError(
            404,
            "missing_v1",
            f"No endpoint {path}: the gateway's paths start with /v1. Set the client's base URL to end in "
            f'/v1 (e.g. `base_url="https://<tandem>/v1"`), so it calls /v1{path}.',
        )
    if path.startswith("/v1/v1/"):
        return GatewayError(
            404,
            "doubled_v1",
            f"No endpoint {path}: /v1 appears twice. The client adds the path after its base URL; "
            f"end the base URL in a single /v1, so it calls {path.removeprefix('/v1')}.",
        )
    return GatewayError(
        404, "unknown_endpoint", f"No endpoint {path}; this gateway serves {', '.join(KNOWN)}."
    )


# Errors a retry cannot mend: the SDKs (OpenAI's, Anthropic's, and so Claude Code) do not retry an
# answer that says `x-should-retry: false`, so a wrong key is one readable refusal, not a retry storm.
FINAL_STATUSES = (400, 401, 403, 404, 405, 413)


def _context_for(request: dict[str, Any] | None) -> int | None:
    """The served model's context length, when the route table knows it (None before it is loaded)."""
    if not request or not isinstance(request.get("model"), str):
        return None
    table = peek()
    entry = table.by_name.get(request["model"]) if table is not None else None
    return entry.context if entry is not None else None


def _visible(table: RouteTable, record: KeyRecord) -> list[RouteEntry]:
    return [entry for entry in table.entries() if entry.allowed_by(record.allowed_models)]


def _checked(
    table: RouteTable,
    record: KeyRecord,
    request: dict[str, Any] | None,
    problem: GatewayError | None,
    outcome: Outcome,
) -> tuple[RouteEntry, dict[str, Any]]:
    """The request's route and body, once its key may make it: the key's scope, the body, the model."""
    if Scope.INFERENCE not in record.scopes:
        raise GatewayError(403, "missing_scope", "This key lacks the `inference` scope.")
    if problem is not None or request is None:
        raise problem or GatewayError(400, "invalid_json", "The body is not valid JSON.")
    outcome.model = str(request["model"])
    outcome.entry = _route(table, record, outcome.model)
    return outcome.entry, request


def _route(table: RouteTable, record: KeyRecord, model: str) -> RouteEntry:
    entry = table.by_name.get(model)
    if entry is None:
        names = ", ".join(n for e in _visible(table, record) for n in e.names) or "none"
        raise GatewayError(
            404, "model_not_found", f"No model {model!r} here. Models for this key: {names}.", param="model"
        )
    if not entry.allowed_by(record.allowed_models):
        allowed = ", ".join(record.allowed_models)
        raise GatewayError(
            403,
            "model_not_allowed",
            f"This key may not call {entry.model!r}; it may call: {allowed}.",
            param="model",
        )
    return entry


async def _send_error(send: Send, error: GatewayError, *, messages_api: bool) -> None:
    body = anthropic_body(error) if messages_api else openai_body(error)
    headers = [*JSON, *[(k.encode(), v.encode()) for k, v in error.headers.items()]]
    if error.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="tandem"'))
    if error.status in FINAL_STATUSES:
        headers.append((b"x-should-retry", b"false"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


TRACE_ID_HEADER = b"x-tandem-trace-id"


def _trace_context(scope: Scope_, outcome: Outcome) -> None:
    """The caller's trace continued (a valid `traceparent`), else a new one; the gateway's own span."""
    parent = state = None
    for key, value in scope.get("headers", ()):
        if key == b"traceparent":
            parent = value.decode("latin-1")
        elif key == b"tracestate":  # several headers are one list (the spec), joined in order
            state = value.decode("latin-1") if state is None else f"{state},{value.decode('latin-1')}"
    caller = tracecontext.parse_traceparent(parent) if parent is not None else None
    if caller is None:  # none or invalid: a new trace, and the caller's tracestate goes with its parent
        outcome.trace_id, outcome.span_id = tracecontext.new_ids()
        return
    outcome.trace_id, outcome.parent_span_id, _ = caller
    outcome.span_id = tracecontext.new_span_id()
    outcome.tracestate = tracecontext.valid_tracestate(state)


def _traced(send: Send, trace_id: str) -> Send:
    """`send` that names the request's trace in the response's headers, whoever starts the response."""
    header = (TRACE_ID_HEADER, trace_id.encode())

    async def traced(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)

    return traced


async def application(scope: Scope_, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"].rstrip("/") or "/"
    if path == traces_receiver.PATH:  # OTLP spans from the engines: not a model call, not traced
        await traces_receiver.serve(scope, receive, send, source_ip=incoming.source_ip(scope))
        return
    method = scope["method"]
    messages_api = path in (MESSAGES, COUNT_TOKENS)
    started = time.monotonic()
    outcome = Outcome()
    if settings.TRACES_GATEWAY:
        _trace_context(scope, outcome)
        send = _traced(send, outcome.trace_id)
    grant: AsyncGrant | None = None
    group = ""
    try:
        wanted = KNOWN.get(path)
        if wanted is None and path.startswith(RESPONSES + "/"):
            raise GatewayError(
                404,
                "response_not_stored",
                "This gateway keeps no responses (`store: true` is not served): there is none to read "
                "or delete. Send the whole conversation in `input` with `store: false`.",
            )
        if wanted is None:
            raise _unknown_path(path)
        if method != wanted:
            raise GatewayError(405, "method_not_allowed", f"{path} takes {wanted}.")
        token = incoming.token(scope)
        source_ip = incoming.source_ip(scope)
        # The body comes first: its most tokens are reserved against the key's limits at admission.
        raw = b"" if path == MODELS else await incoming.read_body(receive)
        request, problem = incoming.try_parse(raw) if path != MODELS else ({}, None)
        group = prefix_group(request)
        context = _context_for(request)
        wants = reserve.reservation(path, request, body_bytes=len(raw), context=context)
        if path == MODELS:
            check = authenticate(token, kind="inference", source_ip=source_ip)
            grant = await admitted(check, source_ip=source_ip, path=path, token=token)
            if Scope.INFERENCE not in grant.record.scopes:
                raise GatewayError(403, "missing_scope", "This key lacks the `inference` scope.")
            await _send_models(send, _visible(await current(), grant.record))
            outcome.status = 200
            return
        early = admit_early(token, kind="inference", source_ip=source_ip, reserve=wants)
        admission = await admitted(early, source_ip=source_ip, path=path, token=token)
        if isinstance(admission, AsyncGrant):
            grant = admission
            entry, body = _checked(await current(), grant.record, request, problem, outcome)
            work: Awaitable[None] = _work(path, body, entry, send, outcome, raw)
        else:  # the check is in flight: the upstream call starts now, its answer waits for the check
            try:
                entry, body = _checked(await current(), admission.record, request, problem, outcome)
            except GatewayError:
                grant = await admitted(admission.grant, source_ip=source_ip, path=path, token=token)
                raise
            grant, work, release = await speculate(
                admission,
                lambda gated_send: _work(path, body, entry, gated_send, outcome, raw),
                send,
                source_ip=source_ip,
                path=path,
                token=token,
            )
            if grant.record.generation != admission.record.generation:  # the key changed meanwhile
                try:
                    _checked(await current(), grant.record, request, problem, outcome)
                except GatewayError:
                    await stop(work)
                    raise
            release()
        if request is not None and request.get("stream") is True:
            try:
                await cancel.until_disconnect(work, receive)
            except cancel.ClientCancelled:
                cancel.charge_cut(outcome, body_bytes=len(raw))
        else:
            await work
    except GatewayError as error:
        outcome.status = error.status
        outcome.error_code = error.code
        if not outcome.started:
            await _send_error(send, error, messages_api=messages_api)
    except redis.RedisError:  # Redis trouble outside the limits (they serve on without it): say so
        logger.warning("gateway request to %s met a Redis error", path, exc_info=True)
        outcome.status = 503
        outcome.error_code = "redis_unavailable"
        failure = GatewayError(
            503,
            "redis_unavailable",
            "The gateway cannot reach Redis right now; retry in a few seconds. "
            "If it persists, the operator should check Redis (REDIS_URL).",
            headers={"retry-after": "2"},
        )
        if not outcome.started:
            await _send_error(send, failure, messages_api=messages_api)
    except (ConnectionResetError, OSError):
        outcome.status = 499
        outcome.error_code = "client_gone"
    except Exception:  # an upstream answer we could not relay: say so in the caller's format
        logger.exception("gateway request to %s failed", path)
        outcome.status = 502
        outcome.error_code = "gateway_error"
        failure = GatewayError(
            502, "gateway_error", "The gateway could not relay the upstream's answer; retry."
        )
        if not outcome.started:
            await _send_error(send, failure, messages_api=messages_api)
        else:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        if grant is not None:
            await _finish(grant, outcome, path, started, group)


def _work(
    path: str, request: dict[str, Any], entry: RouteEntry, send: Send, outcome: Outcome, raw: bytes
) -> Awaitable[None]:
    if path == COUNT_TOKENS:
        chat = anthropic.to_chat({**request, "max_tokens": request.get("max_tokens") or 1})
        return tokencount.serve(chat, entry, send, outcome)
    if path == MESSAGES:
        return anthropic.serve(request, entry, send, outcome)
    if path == RESPONSES:
        return responses.serve(request, entry, send, outcome, raw=raw)
    return dispatch.serve(path, request, entry, send, outcome, raw=raw)


async def _send_models(send: Send, entries: list[RouteEntry]) -> None:
    created = int(time.time())
    data = [
        {"id": name, "object": "model", "created": created, "owned_by": f"tandem:{entry.topology_name}"}
        for entry in entries
        for name in entry.names
    ]
    await send({"type": "http.response.start", "status": 200, "headers": JSON})
    await send({"type": "http.response.body", "body": json.dumps({"object": "list", "data": data}).encode()})


async def _finish(grant: AsyncGrant, outcome: Outcome, path: str, started: float, group: str = "") -> None:
    try:
        settled = await grant.settle(tokens_used=outcome.prompt_tokens + outcome.completion_tokens)
    except Exception:
        logger.warning("could not settle a gateway request's key usage")
        settled = ()
    # Request quotas cross their thresholds when the request is counted, token quotas when it settles.
    crossed = (*grant.crossed, *settled)
    if crossed:
        key_events.queue_budget_alerts(grant.record.key_id, crossed)
    if path == MODELS:
        return
    latency_ms = (time.monotonic() - started) * 1000
    gatewayspans.note(outcome, endpoint=path.removeprefix("/v1/"), latency_ms=latency_ms)
    record_request(
        outcome,
        key_id=grant.record.key_id,
        model=outcome.model,
        topology_id=outcome.entry.topology_id if outcome.entry else None,
        endpoint=path.removeprefix("/v1/"),
        latency_ms=latency_ms,
        trace_id=outcome.trace_id,
        prefix_group=group,
    )


async def lifespan(receive: Receive, send: Send) -> None:
    """ASGI lifespan: at start-up, what failing over needs is made (gateway.startup); at shutdown, the
    records not yet written are written (a restart loses none)."""
    from gateway import startup
    from gateway.recorder import flush_all

    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await startup.prepare()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await flush_all()
            await gatewayspans.flush()
            try:
                await reconcile_now()
            except Exception:
                logger.warning("Redis is away at shutdown: usage counted while it was away is lost")
            await send({"type": "lifespan.shutdown.complete"})
            return
