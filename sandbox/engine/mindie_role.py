"""MindIE's PD role assignment on its management API, as MindIE-LLM's `DmiRole` serves it.

Real MindIE (inferMode "dmi", LLM-DataDist underneath) is told its role and its peers by a controller:

* `POST /v1/role/{prefill|decode}` with `{"local": {"id", "server_ip", "host_ip", "device": [...]},
  "peers": [{"id", "server_ip", "host_ip", "device": [...]}, ...]}`. The peer list is the whole set the
  instance should be linked with: peers missing from it are unlinked, new ones linked (a decode
  instance initiates the links; a prefill instance accepts links from the decode peers it lists). The
  answer comes at once, `200 {"result": "ok"}`, while the work runs in the background with
  `roleStatus` "RoleSwitching"; an unreadable body is `422` ("Input validation error"), an update the
  engine cannot make `503` ("Service Unavailable").
* `GET /v1/status`: `{"service": {"roleStatus": "RoleReady"|"RoleSwitching", "currentRole"},
  "resource": {..., "waitingRequestNum", "runningRequestNum"}, "linkStatus": {"peers": [{"target": id,
  "link": "ok" | "failed : ..."}]}}`.

Every answer has MindIE-LLM's shapes (`HttpRestResource::WrapperJson`: `{"error", "error_type"}` and no
other field; docs/ascend.md cites the source). Where the sandbox is stricter than MindIE (never kinder): a
role change is refused with `503` whose `error` text names LLM-DataDist's `LLM_EXIST_LINK` and the open
links while any link of the instance is still open (LLM-DataDist's own `switch_role` refuses so; MindIE
tears its links down inside the switch), and while requests are in
flight or a prefill still holds KV a decode has not pulled (`runningRequestNum` counts those, as
MindIE's prefill keeps a request until its KV is released). Linking costs `SANDBOX_LINK_SETUP_MS` per
peer, unlinking `SANDBOX_LINK_TEARDOWN_MS`, the switch itself `SANDBOX_ROLE_SWITCH_MS` (all times the
time scale). Once an instance has been given a peer table, a decode pulls KV only over the links that
assignments set up (`LLM_NOT_YET_LINK` otherwise); before any assignment links form on first use, as
the sandbox models a controller-linked deployment. Peers are found by `server_ip` (the pod IP);
on NPUs (`ASCEND_VISIBLE_DEVICES`, which the sandbox's device plugin sets) every instance must list its
devices as MindIE parses them (`device_ip`, `device_id` digits; locally `device_logical_id` too), and the
local list must be exactly the NPUs the instance holds: an assignment without device IPs could not link
on real hardware, so the sandbox refuses it (422). Engines other than MindIE
answer 404: vLLM and SGLang serve no such route.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from sandbox.engine import links as L
from sandbox.engine.engine import ROLES, SimEngine

READY = "RoleReady"
SWITCHING = "RoleSwitching"


def _answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


def _wrapped(message: str, status: int) -> web.Response:
    kind = {422: "Input validation error", 503: "Service Unavailable", 404: "Not Found"}[status]
    return _answer({"error": message, "error_type": kind}, status)


def _device_problem(node: dict[str, Any], own: list[str] | None) -> str:
    """Why a node's device list is not what MindIE reads (''), as its DmiRole parses it: every device a
    ``device_ip`` and a ``device_id`` string of digits; the local one also a ``device_logical_id``, and
    (stricter than MindIE, which fails later at linking) exactly the devices the instance holds."""
    devices = node.get("device", [])
    if not isinstance(devices, list):
        return "'device' must be a list"
    for device in devices:
        if not isinstance(device, dict) or not isinstance(device.get("device_ip"), str):
            return "every device needs its 'device_ip' (the NPU's address, from the device plugin)"
        if not isinstance(device.get("device_id"), str) or not device["device_id"].isdigit():
            return "every device needs its 'device_id' as a string of digits"
    if own is None:
        return ""
    if any("device_logical_id" not in d for d in devices):
        return "every local device needs its 'device_logical_id'"
    listed = sorted(d["device_id"] for d in devices)
    if listed != sorted(own):
        return f"local 'device' lists NPUs {listed or 'none'}, but this instance holds {sorted(own)}"
    return ""


def parse_assignment(
    body: Any, own_devices: list[str] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]] | str:
    """(local, peers) of a role-assignment body, or why it is unreadable (pure). ``own_devices``: the
    NPUs the instance holds (``ASCEND_VISIBLE_DEVICES``); with them every instance must list its own."""
    if not isinstance(body, dict) or not isinstance(body.get("local"), dict):
        return "body must be an object with a 'local' object and a 'peers' list"
    peers = body.get("peers")
    if not isinstance(peers, list):
        return "'peers' must be a list of instances"
    for node in [body["local"], *peers]:
        if not isinstance(node, dict):
            return "every peer must be an object"
        if not isinstance(node.get("id"), int) or isinstance(node.get("id"), bool):
            return "every instance needs an integer 'id'"
        if not isinstance(node.get("server_ip"), str) or not node["server_ip"]:
            return "every instance needs its 'server_ip'"
        problem = _device_problem(node, own_devices if node is body["local"] else None)
        if not problem and own_devices and not node.get("device"):
            problem = f"instance {node['id']} lists no NPU 'device' to link with"
        if problem:
            return problem
    return body["local"], list(peers)


class RoleState:
    """One MindIE instance's view of its assignment: status, peer table and link results."""

    def __init__(self) -> None:
        self.status = READY
        self.peers: dict[int, str] = {}  # peer id -> server_ip
        self.results: dict[int, str] = {}  # peer id -> "ok" | "failed : ..."
        self.task: asyncio.Task[None] | None = None


def state(engine: SimEngine) -> RoleState:
    found = getattr(engine, "_mindie_role", None)
    if found is None:
        found = RoleState()
        engine._mindie_role = found  # type: ignore[attr-defined]
    return found


def busy_requests(engine: SimEngine) -> tuple[int, int]:
    """(running, waiting) as MindIE counts them; a prefill's KV awaiting its pull counts as running."""
    scheduler = engine.scheduler
    running = len(scheduler.running) + len(scheduler.held)
    return max(running, engine.inflight - len(scheduler.waiting)), len(scheduler.waiting)


def _peer_link_status(engine: SimEngine, ip: str) -> str:
    for link in engine.links.open_links():
        if link.peer_address.split(":", 1)[0] == ip:
            return "ok" if link.usable else f"failed : {link.status}"
    return ""


def status_body(engine: SimEngine) -> dict[str, Any]:
    st = state(engine)
    running, waiting = busy_requests(engine)
    peers = []
    for peer_id, ip in sorted(st.peers.items()):
        live = _peer_link_status(engine, ip)
        peers.append({"target": peer_id, "link": live or st.results.get(peer_id) or "failed : not linked"})
    free = max(0, engine.cfg.num_gpu_blocks - len(engine.cache))
    return {
        "service": {"roleStatus": st.status, "currentRole": engine.role},
        "resource": {
            "availSlotsNum": max(0, engine.cfg.max_num_seqs - running),
            "availBlockNum": free,
            "waitingRequestNum": waiting,
            "runningRequestNum": running,
            "swappedRequestNum": 0,
            "freeNpuBlockNums": free,
            "freeCpuBlockNums": 0,
            "totalNpuBlockNums": engine.cfg.num_gpu_blocks,
            "totalCpuBlockNums": 0,
        },
        "linkStatus": {"peers": peers},
    }


async def _sleep_ms(engine: SimEngine, ms: float) -> None:
    if ms > 0:
        await asyncio.sleep(ms / 1000 * engine.cfg.time_scale)


async def _apply_peers(engine: SimEngine, peers: dict[int, str]) -> None:
    """Unlink what is no longer listed, link (decode side) what is new."""
    st = state(engine)
    wanted_ips = set(peers.values())
    for link in engine.links.open_links():
        if link.peer_address.split(":", 1)[0] not in wanted_ips:
            await _sleep_ms(engine, engine.cfg.link_teardown_ms)
            engine.unlink(link.peer)
    st.peers = dict(peers)
    st.results = {}
    engine.peer_table_assigned = True
    for peer_id, ip in sorted(peers.items()):
        if engine.role != "decode":
            st.results[peer_id] = "ok"  # a prefill accepts the links its decode peers open
            continue
        if _peer_link_status(engine, ip) == "ok":
            st.results[peer_id] = "ok"
            continue
        await _sleep_ms(engine, engine.cfg.link_setup_ms)
        ret, results = await engine.link_to([ip], engine.cfg.kv_timeout_ms)
        result = results[0] if results else {"status": ret, "message": ""}
        ok = result["status"] in (L.LLM_SUCCESS, L.LLM_EXIST_LINK)
        st.results[peer_id] = (
            "ok" if ok else f"failed : {result['status']} {result.get('message', '')}".strip()
        )


async def _run(engine: SimEngine, role: str, peers: dict[int, str]) -> None:
    st = state(engine)
    try:
        if role != engine.role:
            await _sleep_ms(engine, engine.cfg.role_switch_ms)
            status, answer = engine.switch_role(role)
            if status != 200:
                engine.log(f"role switch to {role} failed: {answer}", "ERROR", "dmi_role")
                return
        await _apply_peers(engine, peers)
        engine.log(f"role {engine.role} assigned with {len(peers)} peers", source="dmi_role")
    finally:
        st.status = READY
        st.task = None


async def post_role(request: web.Request, engine: SimEngine) -> web.Response:
    role = request.match_info["role"]
    if engine.spec.engine != "mindie" or role not in ROLES:
        return _answer({"error": {"message": f"Not Found: {request.path}"}}, 404)
    if engine.family != "llm-datadist":
        return _wrapped("the instance does not run PD-separated (inferMode dmi with LLM-DataDist)", 503)
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    visible = engine.spec.env_dict().get("ASCEND_VISIBLE_DEVICES", "")
    parsed = parse_assignment(body, [d for d in visible.split(",") if d] or None)
    if isinstance(parsed, str):
        return _wrapped(f"Req body converts to json fail ({parsed}). Reset to previous node status.", 422)
    _, peer_list = parsed
    st = state(engine)
    if st.status == SWITCHING:
        return _wrapped("a role assignment is still in progress; retry once roleStatus is RoleReady", 503)
    peers = {int(p["id"]): str(p["server_ip"]) for p in peer_list}
    if role != engine.role:
        if not peers:
            return _wrapped("Parse req json failed: peers can't be empty while role is P or D.", 503)
        running, waiting = busy_requests(engine)
        if running or waiting:
            return _wrapped(
                f"instance is not idle ({running} running, {waiting} waiting); drain it first", 503
            )
        if len(engine.links):
            open_peers = sorted(link.peer for link in engine.links.open_links())
            return _wrapped(
                f"switch_role refused: {L.LLM_EXIST_LINK}, links to {', '.join(open_peers)} are open. "
                "Reset to previous node status.",
                503,
            )
    st.status = SWITCHING
    st.task = asyncio.get_running_loop().create_task(_run(engine, role, peers))
    return _answer({"result": "ok"})


async def get_status(request: web.Request, engine: SimEngine) -> web.Response:
    if engine.spec.engine != "mindie":
        return _answer({"error": {"message": f"Not Found: {request.path}"}}, 404)
    return _answer(status_body(engine))
