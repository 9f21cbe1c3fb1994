"""The in-place role switch, the pure parts: the MindIE role-assignment bodies Tandem sends, and what
MindIE's and SGLang's answers mean.

An in-place switch of instance X from role A to role B on MindIE (the executor is
``rebalancing.services.inplace``), each step logged on the Rebalance:

1. stop routing: X's serving-role label becomes ``none`` (the router's pdGroup no longer matches it);
2. drain: wait (bounded by the drain timeout) until X's engine reports no running and no waiting
   request, twice in a row (a prefill keeps a request until its KV has been pulled);
3. unlink: X is given an empty peer table (it drops the links it opened) and, when X is a prefill,
   every decode is given the prefills without X (a decode opens the links, so it must close them);
4. switch: ``POST /v1/role/B`` to X with the other role's instances as peers (refused with
   ``LLM_EXIST_LINK`` if a link were still open);
5. re-link, decode initiating: if B is decode, X links to every prefill (its own peer table); if B is
   prefill, every decode is given the prefills with X;
6. verify: X reports ``RoleReady``, ``currentRole`` B and every expected link ``ok``;
7. resume routing: X's serving-role label becomes B.

On SGLang steps 3 to 5 are one call, ``POST /pd_role_switch {"new_role": B}`` (refused unless the
instance is idle): the engine tears its KV transfer side down and rebuilds it for B itself, and a
decode reaches a prefill through its bootstrap server per request, so there are no links to close or
open from outside; the live role is in ``GET /server_info``.

A failure at any step returns X to serving A: the same unlink / switch / re-link toward A, then the
label back to A. Only the label changes on the pod, never its owner's role: Kthena keeps counting X as
an A replica, and a replacement pod starts as A again (Tandem then drops the override).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

# How long the executor waits for an instance's in-flight requests before the switch fails (the default of
# REBALANCE_DRAIN_TIMEOUT_SECONDS); the simulator (perfmodel.sim) drains with the same bound.
DRAIN_TIMEOUT_SECONDS = 30.0
# A failed switch fails the whole move: the instance, and those of the move not yet switched, serve their old
# role again and nothing retries it (the planner decides anew at its next tick). The simulator does the same.
FAILED_SWITCH_FAILS_MOVE = True

# Where the Ascend device plugin writes a pod's NPUs and their device IPs (the rank table's source);
# newer releases of the plugin use the second key.
ASCEND_ANNOTATIONS = (
    "ascend.kubectl.kubernetes.io/ascend-910-configuration",
    "ascend.kubectl.kubernetes.io/ascend-npu-configuration",
)


@dataclass(frozen=True)
class Instance:
    name: str
    ip: str
    serving: str  # the role it serves now (its serving-role label)
    template: str  # its template's role (the owner's)
    devices: tuple[tuple[str, str], ...] = field(default=())  # (device_id, device_ip) of its NPUs
    restarts: int = 0  # its containers' restarts (a restart brings the engine back in its template's role)
    ready: bool = True  # Ready, with an address


def instance_id(pod: str) -> int:
    """A stable MindIE instance id for a pod (the controller's choice; MindIE only needs it unique)."""
    return zlib.crc32(pod.encode()) % 1_000_000


def ascend_devices(annotations: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The pod's NPUs as (device_id, device_ip) from the Ascend device plugin's annotation
    (``{"pod_name", "server_id", "devices": [{"device_id", "device_ip"}]}``); () when absent or unreadable."""
    for key in ASCEND_ANNOTATIONS:
        try:
            data = json.loads(annotations.get(key) or "null")
            listed = data.get("devices") if isinstance(data, dict) else None
            devices = tuple((str(d["device_id"]), str(d["device_ip"])) for d in listed or [])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        if devices:
            return devices
    return ()


def node(instance: Instance) -> dict[str, Any]:
    """One instance as MindIE's role assignment lists it: its pod address and its NPUs with their device
    IPs (``device_logical_id`` is the device's place among the container's visible NPUs)."""
    devices = [
        {"device_id": device_id, "device_ip": device_ip, "device_logical_id": str(index)}
        for index, (device_id, device_ip) in enumerate(instance.devices)
    ]
    return {
        "id": instance_id(instance.name),
        "server_ip": instance.ip,
        "host_ip": instance.ip,
        "device": devices,
    }


def devices_problem(instances: list[Instance]) -> str:
    """Why MindIE cannot be given these instances' role assignments ('' when it can): an instance whose
    pod carries no NPU device list could not link."""
    missing = sorted(i.name for i in instances if not i.devices)
    if not missing:
        return ""
    return (
        f"{', '.join(missing)} carries no NPU device list ({ASCEND_ANNOTATIONS[0]}): MindIE links by "
        "device IP; is the Ascend device plugin running on its node?"
    )


def assignment(local: Instance, peers: list[Instance]) -> dict[str, Any]:
    return {"local": node(local), "peers": [node(p) for p in sorted(peers, key=lambda p: p.name)]}


def link_states(status: dict[str, Any], peers: list[Instance]) -> dict[str, str]:
    """Each expected peer's link as the status answer shows it (pod name -> "ok" | why not), from
    either shape MindIE's own code has for ``GET /v1/status``:

    - MindIE-LLM's server (``HandleStatusV1``) and MindIE-MS's controller, which parses it
      (``ParseNodeStatusPeers``): ``linkStatus.peers[]`` of ``{"target": <instance id>, "link": "ok" |
      "failed : <code>" | "failed : pull kv failed."}``;
    - MindIE-MS's server mock (``tests/ms/dt/common/mindie_server/MindIEServer.cpp``): no ``linkStatus``,
      a top-level ``peers`` list of the peers' ``server_ip`` on a decode (no per-link state: listed
      counts as linked), which the controller also validates (``IsValidNodeStatusResp``)."""
    block = status.get("linkStatus")
    if isinstance(block, dict) and isinstance(block.get("peers"), list):
        links = {str(p.get("target")): str(p.get("link")) for p in block["peers"] if isinstance(p, dict)}
        return {p.name: links.get(str(instance_id(p.name)), "not linked") for p in peers}
    listed = status.get("peers")
    if isinstance(listed, list):
        ips = {str(ip) for ip in listed}
        return {p.name: "ok" if p.ip in ips else "not linked" for p in peers}
    return {p.name: "not linked (the status answer has neither linkStatus.peers nor peers)" for p in peers}


def status_problem(status: Any, role: str, peers: list[Instance]) -> str:
    """Why a ``GET /v1/status`` answer does not show ``role`` ready and linked to ``peers`` ('' if so).
    A prefill's links are opened by its decodes and a mock prefill lists none, so a prefill that shows
    no peer list at all is not held against it."""
    if not isinstance(status, dict):
        return "the engine's status answer is not a JSON object"
    service = status.get("service") or {}
    if not isinstance(service, dict):
        return "the engine's status answer has no 'service' object"
    if service.get("roleStatus") != "RoleReady":
        return f"role status is {service.get('roleStatus')!r}, not 'RoleReady'"
    if service.get("currentRole") != role:
        return f"the engine serves {service.get('currentRole')!r}, not {role!r}"
    no_list = "linkStatus" not in status and "peers" not in status
    if role == "prefill" and no_list:
        return ""
    bad = [f"{name}: {link}" for name, link in link_states(status, peers).items() if link != "ok"]
    return f"links not up ({'; '.join(bad)})" if bad else ""


def busy_count(status: Any) -> int | None:
    """Requests running or waiting on the engine, from its status answer (None if it does not say:
    MindIE's ``/v2/status``, for multi-node instances, carries only slot and block counts)."""
    resource = status.get("resource") if isinstance(status, dict) else None
    if not isinstance(resource, dict):
        return None
    if "runningRequestNum" not in resource and "waitingRequestNum" not in resource:
        return None
    try:
        return int(resource.get("runningRequestNum", 0)) + int(resource.get("waitingRequestNum", 0))
    except (TypeError, ValueError):
        return None


_LLM_CODE = re.compile(r"\b(LLM_[A-Z_]+)\b")


def engine_refusal(status_code: int, body: Any) -> tuple[str, str]:
    """(code, message) of a refused role assignment. MindIE-LLM answers ``{"error": <text>,
    "error_type": <kind>}`` (``HttpRestResource::WrapperJson``: 422 "Input validation error", 503
    "Service Unavailable"); an LLM-DataDist status code is taken from ``ret`` when an engine adds one,
    else from the text; an answer of 200 without ``"result": "ok"`` is no acceptance either."""
    if not isinstance(body, dict):
        return f"http_{status_code}", f"HTTP {status_code}"
    error = body.get("error")
    if isinstance(error, dict):  # OpenAI-style {"error": {"message": ...}} (an engine without the route)
        error = error.get("message")
    message = str(error or body.get("message") or "")
    found = _LLM_CODE.search(message)
    code = str(body.get("ret") or (found[1] if found else ""))
    links = body.get("links")
    if code == "LLM_EXIST_LINK" and isinstance(links, list):
        message = f"{message} (open links: {', '.join(map(str, links))})"
    message = message or str(body.get("error_type") or "")
    return code or f"http_{status_code}", message or f"HTTP {status_code}"


def role_accepted(status_code: int, body: Any) -> bool:
    """MindIE accepted a role assignment: ``200 {"result": "ok"}`` (``DmiRole::ProcessPDRoleSwitch``;
    MindIE-MS's controller retries any other 200 answer)."""
    return status_code == 200 and isinstance(body, dict) and body.get("result") == "ok"


# --- SGLang: POST /pd_role_switch; the engine rebuilds its KV transfer side itself -----------------


def sglang_busy(metrics_text: str) -> int | None:
    """Requests running or queued on an SGLang instance, from its /metrics (None if it does not say)."""
    from prometheus_client.parser import text_string_to_metric_families

    total, seen = 0.0, False
    try:
        for family in text_string_to_metric_families(metrics_text):
            for sample in family.samples:
                if sample.name in ("sglang:num_running_reqs", "sglang:num_queue_reqs"):
                    total += float(sample.value)
                    seen = True
    except ValueError:
        return None
    return int(total) if seen else None


def sglang_live_role(info: Any) -> str | None:
    """The role an SGLang instance serves now: its scheduler's state in /server_info (the server
    arguments keep the launch role)."""
    states = info.get("internal_states") if isinstance(info, dict) else None
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    mode = state.get("disaggregation_mode")
    return str(mode) if mode in ("prefill", "decode") else None
