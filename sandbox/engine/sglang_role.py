"""SGLang's runtime P/D role switch, as its HTTP server serves it.

* `POST /pd_role_switch {"new_role": "prefill"|"decode"}`: the scheduler tears its disaggregation side
  down (KV transfer manager, queues, prefix cache) and rebuilds it for the new role, then answers
  `200 {"success": true, "message", "old_role", "new_role"}`. Refusals are `400` with `"success":
  false` and the reason: `--enable-pd-role-switch` not set, a switch already in progress, an invalid
  role, not in PD disaggregation mode, a transfer backend that cannot switch (the sandbox allows
  Mooncake only), or an instance that is not idle (it never drains by itself). The same role is a
  success with "already in target role".
* `GET /server_info`: the live role is `internal_states[0].disaggregation_mode` (the server arguments
  keep the launch role).

The switch costs `SANDBOX_LINK_TEARDOWN_MS` per open link and `SANDBOX_ROLE_SWITCH_MS` (times the time
scale). Engines other than SGLang answer 404.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from sandbox.engine.engine import ROLES, SimEngine
from sandbox.engine.mindie_role import busy_requests

FLAG = "--enable-pd-role-switch"


def _answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def _not_found(request: web.Request) -> web.Response:
    return _answer({"detail": "Not Found"}, 404)


def _launch_role(engine: SimEngine) -> str:
    return engine.spec.role if engine.spec.role in ROLES else "null"


async def pd_role_switch(request: web.Request, engine: SimEngine) -> web.Response:
    if engine.spec.engine != "sglang":
        return _not_found(request)
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    new_role = body.get("new_role") if isinstance(body, dict) else None
    old = engine.role

    def refuse(message: str) -> web.Response:
        return _answer({"success": False, "message": message, "old_role": old, "new_role": new_role}, 400)

    if FLAG not in engine.spec.args:
        return refuse(f"{FLAG} is not set on this instance")
    if getattr(engine, "_sglang_switching", False):
        return refuse("another role switch is already in progress")
    if new_role not in ROLES:
        return refuse(f"invalid new_role={new_role!r}")
    if engine.role not in ROLES:
        return refuse("instance is not running in PD disaggregation mode")
    if engine.spec.kv_connector != "mooncake":
        return refuse(f"transfer backend {engine.spec.kv_connector!r} does not support runtime role switch")
    if new_role == engine.role:
        return _answer(
            {"success": True, "message": "already in target role", "old_role": old, "new_role": old}
        )
    running, waiting = busy_requests(engine)
    if running or waiting:
        return refuse(f"instance is not idle ({running} running, {waiting} waiting)")
    engine._sglang_switching = True  # type: ignore[attr-defined]
    try:
        for link in engine.links.open_links():
            await asyncio.sleep(engine.cfg.link_teardown_ms / 1000 * engine.cfg.time_scale)
            engine.unlink(link.peer)
        await asyncio.sleep(engine.cfg.role_switch_ms / 1000 * engine.cfg.time_scale)
        status, answer = engine.switch_role(str(new_role))
    finally:
        engine._sglang_switching = False  # type: ignore[attr-defined]
    if status != 200:
        return refuse(str(answer.get("message") or answer))
    engine.log(f"PD role switch: {old} -> {new_role}", source="scheduler.py")
    return _answer({"success": True, "message": "ok", "old_role": old, "new_role": new_role})


async def server_info(request: web.Request, engine: SimEngine) -> web.Response:
    if engine.spec.engine != "sglang":
        return _not_found(request)
    running, waiting = busy_requests(engine)
    return _answer(
        {
            "model_path": engine.spec.model,
            "disaggregation_mode": _launch_role(engine),
            "enable_pd_role_switch": FLAG in engine.spec.args,
            "internal_states": [
                {
                    "disaggregation_mode": engine.role if engine.role in ROLES else "null",
                    "#running-req": running,
                    "#queue-req": waiting,
                }
            ],
        }
    )
