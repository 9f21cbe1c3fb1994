"""What the Ascend device plugin does for a pod that asks for NPUs: it picks the node's devices the
container gets, hands them to the container (``ASCEND_VISIBLE_DEVICES``), and writes them with their
device IPs on the pod, as ``ascend.kubectl.kubernetes.io/ascend-910-configuration``:
``{"pod_name", "server_id": <node IP>, "devices": [{"device_id": "3", "device_ip": "..."}]}``. Rank-table
builders and P/D controllers (MindIE's role assignment lists every instance's devices) read it from
there. The sandbox's device IPs are made up (``192.168.<node>.<100 + device>``): nothing routes to them,
but an engine that is given none, or the wrong ones, can tell."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

ANNOTATION = "ascend.kubectl.kubernetes.io/ascend-910-configuration"
VISIBLE = "ASCEND_VISIBLE_DEVICES"


def npu_request(pod: dict[str, Any]) -> tuple[str, int] | None:
    """(resource, count) of the NPUs the pod's containers ask for (``huawei.com/...``), or None."""
    total, name = 0, ""
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
        for resource, amount in asked.items():
            if str(resource).startswith("huawei.com/"):
                try:
                    total += int(str(amount))
                except ValueError:
                    continue
                name = str(resource)
    return (name, total) if total > 0 else None


def devices_in_use(pods: Iterable[dict[str, Any]], node: str, skip: str) -> set[int]:
    """Device ids the node's other pods hold (from their annotations)."""
    used: set[int] = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        if pod.get("spec", {}).get("nodeName") != node or meta.get("uid") == skip:
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        used.update(int(d["device_id"]) for d in parse(meta.get("annotations") or {}))
    return used


def allocate(count: int, used: set[int]) -> list[int]:
    ids: list[int] = []
    candidate = 0
    while len(ids) < count:
        if candidate not in used:
            ids.append(candidate)
        candidate += 1
    return ids


def device_ip(node_index: str, device: int) -> str:
    return f"192.168.{int(node_index) % 256}.{100 + device}"


def annotation(pod_name: str, host_ip: str, node_index: str, ids: list[int]) -> str:
    devices = [{"device_id": str(i), "device_ip": device_ip(node_index, i)} for i in ids]
    return json.dumps({"pod_name": pod_name, "server_id": host_ip, "devices": devices})


def parse(annotations: dict[str, Any]) -> list[dict[str, str]]:
    """The devices listed in a pod's annotation ([] when absent or unreadable)."""
    try:
        data = json.loads(str(annotations.get(ANNOTATION) or "{}"))
        return [
            {"device_id": str(d["device_id"]), "device_ip": str(d["device_ip"])}
            for d in data.get("devices") or []
        ]
    except (ValueError, TypeError, KeyError, AttributeError):
        return []


def hand_out(api: Any, rt: Any, pod: dict[str, Any], node: str, host_ip: str, engine: str) -> dict[str, Any]:
    """Allocate the pod's NPUs on its node (once: a restarted container keeps them), write the
    annotation, and return the pod as the engine container sees it (``ASCEND_VISIBLE_DEVICES`` set)."""
    asked = npu_request(pod)
    if asked is None:
        return pod
    meta = pod["metadata"]
    ids = [int(d["device_id"]) for d in parse(meta.get("annotations") or {})]
    if len(ids) != asked[1]:
        ids = allocate(asked[1], devices_in_use(api.store.iter("", "pods"), node, meta.get("uid", "")))
        index = node.rsplit("-", 1)[-1]
        meta.setdefault("annotations", {})[ANNOTATION] = annotation(
            meta["name"], host_ip, index if index.isdigit() else "0", ids
        )
        pod = api.write(rt, pod, "ascend-device-plugin")
    seen = copy.deepcopy(pod)  # the runtime hands the devices to the container; the stored spec keeps none
    for container in seen["spec"]["containers"]:
        if container["name"] == engine:
            env = [e for e in container.get("env") or [] if e.get("name") != VISIBLE]
            container["env"] = [*env, {"name": VISIBLE, "value": ",".join(map(str, ids))}]
    return seen
