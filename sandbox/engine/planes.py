"""MindIE's three HTTP planes: service (inference), management and metrics, each on its own port when
its config.json says so (MindIE-LLM ``http_server.cpp`` ``HttpServerInitOfAllPlane`` and
``CreateHttpServerPoint``: ``port``, ``managementPort`` and ``metricsPort``; when two are equal one
server serves both). The management plane serves ``/v1/status``, ``/v2/status``, ``/v1/config``,
``/v1/role/{role}``, ``/v2/role/{role}`` and ``/stopService``; the metrics plane ``/metrics``. A route
asked on a plane that does not serve it is answered 404, as MindIE's server for that port has no such
route. The sandbox's own control routes (``/sandbox/...``) answer on every plane."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

BUSINESS, MANAGEMENT, METRICS = "service", "management", "metrics"
TENT = "tent"  # Mooncake's transfer engine's own /metrics port (``sandbox.engine.tent``)
ALL = frozenset({BUSINESS, MANAGEMENT, METRICS})
PlaneResolver = Callable[[web.Request], frozenset[str]]
PLANE_RESOLVER: web.AppKey[PlaneResolver] = web.AppKey("plane_resolver")
_MANAGEMENT_PATHS = frozenset({"/v1/status", "/v2/status", "/v1/config", "/stopService"})


def plane_of(path: str) -> str:
    """The plane that serves ``path`` on MindIE (pure)."""
    if path == "/metrics":
        return METRICS
    if path in _MANAGEMENT_PATHS or path.startswith(("/v1/role/", "/v2/role/")):
        return MANAGEMENT
    return BUSINESS


def socket_planes(port: int, management: int | None, metrics: int | None) -> dict[int, frozenset[str]]:
    """Port -> the planes it serves, for MindIE's ``port`` and its own management / metrics ports
    (None: that plane is on ``port``) (pure)."""
    planes: dict[int, set[str]] = {port: {BUSINESS}}
    for plane, own in ((MANAGEMENT, management), (METRICS, metrics)):
        planes.setdefault(own if own is not None else port, set()).add(plane)
    return {p: frozenset(v) for p, v in planes.items()}


@web.middleware
async def plane_guard(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    if not request.path.startswith("/sandbox/") and plane_of(request.path) not in request.app[PLANE_RESOLVER](
        request
    ):
        return web.Response(status=404, text="")
    response: web.StreamResponse = await handler(request)
    return response
