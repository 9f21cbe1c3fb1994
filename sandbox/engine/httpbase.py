"""What every route of the simulated engines' HTTP surface shares: which engine a request is for, its
JSON body, JSON answers, and the API key check (``sandbox.engine.app`` builds the application)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from sandbox.engine.engine import SimEngine
from sandbox.engine.openai import error_body

EngineResolver = Callable[[web.Request], SimEngine | None]
CrashHandler = Callable[[SimEngine], None]
ENGINE_RESOLVER: web.AppKey[EngineResolver] = web.AppKey("engine_resolver")
CRASH_HANDLER: web.AppKey[CrashHandler] = web.AppKey("crash_handler")


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def engine_of(request: web.Request) -> SimEngine:
    engine = request.app[ENGINE_RESOLVER](request)
    if engine is None or engine.crashed:
        raise web.HTTPServiceUnavailable(
            text=json.dumps(error_body(503, "engine is not running", "ServiceUnavailableError")),
            content_type="application/json",
            headers={"Connection": "close"},
        )
    return engine


async def read_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise web.HTTPBadRequest(
            text=json.dumps(error_body(400, "The request body is not valid JSON.", "BadRequestError")),
            content_type="application/json",
        ) from None


def unauthorized(engine: SimEngine, request: web.Request) -> web.Response | None:
    if engine.api_key is None:
        return None
    if request.headers.get("Authorization", "") == f"Bearer {engine.api_key}":
        return None
    return json_response({"error": "Unauthorized"}, 401)
