"""The scheduler: binds pending pods to nodes by requested resources (sum of requests ≤ allocatable).

When nothing fits, the pod stays Pending with `PodScheduled=False/Unschedulable` and a
`FailedScheduling` event in the real scheduler's words, e.g.
"0/4 nodes are available: 4 Insufficient huawei.com/Ascend910. preemption: 0/4 nodes are
available: 4 No preemption victims found for incoming pod.". A volume naming a PersistentVolumeClaim
that does not exist fails before any node is tried (the VolumeBinding plugin's PreFilter).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from sandbox.controllers.base import EventRecorder, Reconciler, now_iso, parse_quantity, pod_requests

RETRY_EVENT_SECONDS = 10.0


def pod_is_active(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def node_free(node: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, float]:
    allocatable = {k: parse_quantity(v) for k, v in (node.get("status") or {}).get("allocatable", {}).items()}
    for pod in pods:
        for name, amount in pod_requests(pod).items():
            allocatable[name] = allocatable.get(name, 0.0) - amount
        allocatable["pods"] = allocatable.get("pods", 0.0) - 1
    return allocatable


def fit(requests: dict[str, float], free: dict[str, float]) -> list[str]:
    """Reasons this node cannot take the pod (empty when it fits)."""
    reasons = [
        f"Insufficient {name}"
        for name, amount in sorted(requests.items())
        if amount > free.get(name, 0.0) + 1e-9
    ]
    if free.get("pods", 0.0) < 1:
        reasons.append("Too many pods")
    return reasons


def host_ports(pod: dict[str, Any]) -> set[int]:
    """Ports a pod takes on its node: declared hostPorts, or every container port with hostNetwork."""
    spec = pod.get("spec", {})
    ports = set()
    for container in spec.get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ports.add(int(port["hostPort"]))
            elif spec.get("hostNetwork") and port.get("containerPort"):
                ports.add(int(port["containerPort"]))
    return ports


def _selector_mismatch(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    selector = pod.get("spec", {}).get("nodeSelector") or {}
    labels = node["metadata"].get("labels") or {}
    return any(labels.get(k) != v for k, v in selector.items())


def unschedulable_message(total: int, reasons: Counter[str]) -> str:
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return (
        f"0/{total} nodes are available: {parts}. preemption: 0/{total} nodes are available: "
        f"{total} No preemption victims found for incoming pod."
    )


def missing_claim(pod: dict[str, Any], claims: set[tuple[str, str]]) -> str | None:
    """The first PersistentVolumeClaim a pod's volumes name that does not exist in its namespace."""
    namespace = pod["metadata"].get("namespace", "")
    for volume in pod.get("spec", {}).get("volumes") or []:
        name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if name and (namespace, name) not in claims:
            return str(name)
    return None


def claim_not_found_message(total: int, claim: str) -> str:
    """The VolumeBinding plugin's PreFilter rejection (UnschedulableAndUnresolvable: no node is tried)."""
    return (
        f'0/{total} nodes are available: persistentvolumeclaim "{claim}" not found. '
        f"preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
    )


class Scheduler(Reconciler):
    name = "default-scheduler"
    watches = (("", "pods"), ("", "nodes"), ("", "persistentvolumeclaims"))

    def __init__(self, api: Any, events: EventRecorder) -> None:
        super().__init__(api)
        self.events = events
        self._last_event: dict[str, tuple[str, float]] = {}

    async def reconcile(self) -> None:
        pods_rt = self.rt("", "pods")
        nodes = [n for n in self.api.store.iter("", "nodes") if not n.get("spec", {}).get("unschedulable")]
        all_pods = self.api.store.iter("", "pods")
        bound: dict[str, list[dict[str, Any]]] = {n["metadata"]["name"]: [] for n in nodes}
        pending = []
        for pod in all_pods:
            node_name = pod.get("spec", {}).get("nodeName")
            if node_name:
                if node_name in bound and pod_is_active(pod):
                    bound[node_name].append(pod)
            elif not pod["metadata"].get("deletionTimestamp") and pod.get("spec", {}).get(
                "schedulerName", "default-scheduler"
            ) in ("default-scheduler", "volcano"):
                pending.append(pod)
        pending.sort(key=lambda p: p["metadata"].get("creationTimestamp", ""))
        free = {
            name: node_free(node, bound[name]) for name, node in ((n["metadata"]["name"], n) for n in nodes)
        }
        claims = {
            (c["metadata"].get("namespace", ""), c["metadata"]["name"])
            for c in self.api.store.iter("", "persistentvolumeclaims")
        }
        for pod in pending:
            claim = missing_claim(pod, claims)
            if claim is not None:
                self._unschedulable(pods_rt, pod, claim_not_found_message(len(nodes), claim))
                continue
            requests = pod_requests(pod)
            reasons: Counter[str] = Counter()
            candidates = []
            for node in nodes:
                name = node["metadata"]["name"]
                if _selector_mismatch(pod, node):
                    reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                    continue
                wanted_ports = host_ports(pod)
                if wanted_ports and any(wanted_ports & host_ports(other) for other in bound[name]):
                    reasons["node(s) didn't have free ports for the requested pod ports"] += 1
                    continue
                why = fit(requests, free[name])
                if why:
                    reasons.update(why)
                else:
                    candidates.append(node)
            if candidates:
                # Least allocated first (spread), as the default scoring does.
                best = max(
                    candidates,
                    key=lambda n: (
                        sum(free[n["metadata"]["name"]].values()),
                        -len(bound[n["metadata"]["name"]]),
                    ),
                )
                self._bind(pods_rt, pod, best["metadata"]["name"])
                for resource, amount in requests.items():
                    free[best["metadata"]["name"]][resource] = (
                        free[best["metadata"]["name"]].get(resource, 0.0) - amount
                    )
                free[best["metadata"]["name"]]["pods"] -= 1
                bound[best["metadata"]["name"]].append(pod)
            else:
                self._unschedulable(pods_rt, pod, unschedulable_message(len(nodes), reasons))

    def _bind(self, rt: Any, pod: dict[str, Any], node_name: str) -> None:
        current = self.api.find(rt, pod["metadata"]["namespace"], pod["metadata"]["name"])
        if current is None or current["spec"].get("nodeName"):
            return
        current["spec"]["nodeName"] = node_name
        bound = self.api.write(rt, current, self.name)
        status = dict(bound.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.insert(
            0,
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now_iso(),
            },
        )
        status["conditions"] = conditions
        self.api.write_status(rt, bound, status, self.name)
        meta = bound["metadata"]
        self.events.record(
            bound,
            "Scheduled",
            f"Successfully assigned {meta['namespace']}/{meta['name']} to {node_name}",
            component=self.name,
        )
        self._last_event.pop(meta["uid"], None)

    def _unschedulable(self, rt: Any, pod: dict[str, Any], message: str) -> None:
        status = dict(pod.get("status") or {})
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": now_iso(),
            "reason": "Unschedulable",
            "message": message,
        }
        existing = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if existing is None or existing.get("message") != message:
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ] + [condition]
            status["phase"] = "Pending"
            self.api.write_status(rt, pod, status, self.name)
        uid = pod["metadata"]["uid"]
        last = self._last_event.get(uid)
        if last is None or last[0] != message or time.monotonic() - last[1] > RETRY_EVENT_SECONDS:
            self.events.record(pod, "FailedScheduling", message, type="Warning", component=self.name)
            self._last_event[uid] = (message, time.monotonic())
