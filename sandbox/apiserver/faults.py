"""Faults injected into the emulated API server itself, for testing a client's retries and deadlines.

Control: ``POST /sandbox/apiserver/faults`` (bearer token as for the API) with ``{"kind": KIND, ...}``,
``GET`` lists them, ``DELETE`` (optionally ``?kind=``) clears them. ``python -m sandbox fault --kubeconfig F``
and ``SandboxCluster.api_fault(...)`` wrap it. Kinds:
- ``http_5xx`` {status=503}: answer that status with a Kubernetes ``Status`` body; a 4xx too (e.g. 403
  Forbidden, as when the client's RBAC was revoked).
- ``throttle`` {retry_after=1}: 429 TooManyRequests with ``Retry-After`` (seconds), as API priority and
  fairness does.
- ``latency`` {delay_ms=1000}: answer late (the request is then served normally).
- ``freeze``: accept the connection and never answer (until the fault is cleared), like a hung server.
- ``watch_gone``: a watch gets one ERROR event with a 410 Gone ``Status`` and ends, as when its
  resourceVersion is too old; the client must list again.
Every kind takes ``count`` (the next N matching requests, then it expires), ``path`` (a path prefix such as
``/apis/apps``; default every API path) and ``method`` (e.g. ``PATCH``). ``/version``, ``/healthz`` and the
control path are affected too, except the control path itself, so a frozen server looks frozen to probes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

log = logging.getLogger("sandbox.apiserver")

KINDS = ("http_5xx", "throttle", "latency", "freeze", "watch_gone")
CONTROL_PATH = "/sandbox/apiserver/faults"


class FaultError(ValueError):
    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


_ids = itertools.count(1)


@dataclass
class ApiFault:
    kind: str
    status: int = 503
    retry_after: float = 1.0
    delay_ms: float = 1000.0
    count: int | None = None
    path: str = "/"
    method: str | None = None
    id: int = field(default_factory=lambda: next(_ids))
    hits: int = 0

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.kind == "watch_gone" and not watch:
            return False
        if self.method and self.method != method.upper():
            return False
        return path.startswith(self.path)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "retry_after": self.retry_after,
            "delay_ms": self.delay_ms,
            "count": self.count,
            "path": self.path,
            "method": self.method,
            "hits": self.hits,
        }


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise FaultError(name, f"{name} must be a number from {low:g} to {high:g}")
    return float(value)


def parse_fault(body: Any) -> ApiFault:
    if not isinstance(body, dict):
        raise FaultError("kind", 'send a JSON object such as {"kind": "freeze"}')
    kind = body.get("kind")
    if kind not in KINDS:
        raise FaultError("kind", f"kind must be one of {', '.join(KINDS)}")
    status = int(_number(body, "status", 503, 400, 599))
    count = body.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise FaultError("count", "count must be a whole number ≥ 1 (or omitted: until cleared)")
    path = body.get("path", "/")
    if not isinstance(path, str) or not path.startswith("/"):
        raise FaultError("path", "path must be a path prefix starting with /, e.g. /apis/apps")
    method = body.get("method")
    if method is not None and (not isinstance(method, str) or not method.isalpha()):
        raise FaultError("method", "method must be an HTTP method such as PATCH")
    return ApiFault(
        kind=kind,
        status=status,
        retry_after=_number(body, "retry_after", 1.0, 0, 3600),
        delay_ms=_number(body, "delay_ms", 1000.0, 0, 600_000),
        count=count,
        path=path,
        method=method.upper() if method else None,
    )


class FaultTable:
    """The API server's active faults; the first matching one applies to a request."""

    def __init__(self) -> None:
        self.faults: list[ApiFault] = []
        self.cleared = asyncio.Event()

    def add(self, fault: ApiFault) -> ApiFault:
        self.faults.append(fault)
        self.cleared = asyncio.Event()
        return fault

    def clear(self, kind: str | None = None) -> int:
        before = len(self.faults)
        self.faults = [f for f in self.faults if kind and f.kind != kind]
        self.cleared.set()
        return before - len(self.faults)

    def take(self, method: str, path: str, watch: bool) -> ApiFault | None:
        for fault in self.faults:
            if fault.matches(method, path, watch):
                fault.hits += 1
                if fault.count is not None:
                    fault.count -= 1
                    if fault.count <= 0:
                        self.faults.remove(fault)
                return fault
        return None

    def frozen(self) -> bool:
        return any(f.kind == "freeze" for f in self.faults)


def _json(body: dict[str, Any], status: int) -> web.Response:
    return web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json")


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


async def respond(table: FaultTable, request: web.Request) -> web.StreamResponse | None:
    """The injected answer for this request, or None to serve it normally (after any added latency)."""
    watch = (request.query.get("watch") or "").lower() in ("1", "true", "yes")
    fault = table.take(request.method, request.path, watch)
    if fault is None:
        return None
    log.info("injected %s fault on %s %s", fault.kind, request.method, request.path)
    if fault.kind == "latency":
        await asyncio.sleep(fault.delay_ms / 1000)
        return None
    if fault.kind == "freeze":
        await table.cleared.wait()  # like a hung server: nothing until the fault is cleared
        return None
    if fault.kind == "throttle":
        body = status_body(429, "TooManyRequests", "the server has received too many requests")
        response = _json(body, 429)
        response.headers["Retry-After"] = f"{fault.retry_after:g}"
        return response
    if fault.kind == "http_5xx":
        reasons = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 429: "TooManyRequests"}
        reasons.update({503: "ServiceUnavailable", 504: "Timeout"})
        reason = reasons.get(fault.status, "BadRequest" if fault.status < 500 else "InternalError")
        return _json(status_body(fault.status, reason, f"injected {fault.status} error"), fault.status)
    # watch_gone: the stream opens, then one ERROR event says the resourceVersion is too old.
    stream = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await stream.prepare(request)
    gone = status_body(410, "Expired", "too old resource version")
    await stream.write(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
    await stream.write_eof()
    return stream


async def control(table: FaultTable, request: web.Request) -> web.Response:
    """GET lists, POST adds, DELETE (``?kind=``) clears the API server's faults."""
    if request.method == "GET":
        return _json({"faults": [f.as_dict() for f in table.faults]}, 200)
    if request.method == "DELETE":
        return _json({"cleared": table.clear(request.query.get("kind") or None)}, 200)
    if request.method != "POST":
        return _json(status_body(405, "MethodNotAllowed", "use GET, POST or DELETE"), 405)
    try:
        fault = parse_fault(await request.json())
    except FaultError as exc:
        return _json({"error": {"field": exc.field, "message": str(exc)}}, 422)
    except ValueError:
        return _json({"error": {"field": "body", "message": "send a JSON object"}}, 400)
    table.add(fault)
    return _json({"fault": fault.as_dict()}, 201)
