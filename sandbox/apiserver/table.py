"""Server-side printing: `meta.k8s.io/v1 Table` answers for `kubectl get` (columns as upstream)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sandbox.apiserver.resources import ResourceType

Column = tuple[str, str, int, Callable[[dict[str, Any]], Any]]  # name, type, priority, getter


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = max(0, int((datetime.now(UTC) - then).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _meta_age(obj: dict[str, Any]) -> str:
    return age(obj["metadata"].get("creationTimestamp"))


def pod_status_text(pod: dict[str, Any]) -> str:
    """The STATUS column of `kubectl get pods` (kubectl's printPod rules)."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    init_statuses = status.get("initContainerStatuses") or []
    total_init = len(pod.get("spec", {}).get("initContainers") or [])
    initializing = False
    for index, cs in enumerate(init_statuses):
        state = cs.get("state") or {}
        if "terminated" in state and state["terminated"].get("exitCode") == 0:
            continue
        initializing = True
        if "waiting" in state and state["waiting"].get("reason") not in (None, "PodInitializing"):
            reason = f"Init:{state['waiting']['reason']}"
        else:
            reason = f"Init:{index}/{total_init}"
        break
    if not initializing:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated", {}).get("reason"):
                reason = state["terminated"]["reason"]
            elif "running" in state and cs.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            reason = "Running"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_ready(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len(pod.get("spec", {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_restarts(pod: dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    last = max(
        (s.get("lastState", {}).get("terminated", {}).get("finishedAt", "") for s in statuses), default=""
    )
    return f"{restarts} ({age(last)} ago)" if restarts and last else str(restarts)


def _g(*path: str, default: Any = "<none>") -> Callable[[dict[str, Any]], Any]:
    def get(obj: dict[str, Any]) -> Any:
        node: Any = obj
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return default if node in (None, "") else node

    return get


def _ports(svc: dict[str, Any]) -> str:
    ports = svc.get("spec", {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _external_ip(svc: dict[str, Any]) -> str:
    ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    if ingress:
        return ",".join(i.get("ip") or i.get("hostname", "") for i in ingress)
    return "<pending>" if svc.get("spec", {}).get("type") == "LoadBalancer" else "<none>"


def _node_status(node: dict[str, Any]) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    return text + (",SchedulingDisabled" if node.get("spec", {}).get("unschedulable") else "")


def _endpoints(ep: dict[str, Any]) -> str:
    addresses = [
        f"{a['ip']}:{p.get('port')}"
        for subset in ep.get("subsets") or []
        for a in subset.get("addresses") or []
        for p in subset.get("ports") or [{}]
    ]
    if not addresses:
        return "<none>"
    return ",".join(addresses[:3]) + (f" + {len(addresses) - 3} more..." if len(addresses) > 3 else "")


def _event_object(ev: dict[str, Any]) -> str:
    inv = ev.get("involvedObject") or {}
    return f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"


COLUMNS: dict[str, list[Column]] = {
    "pods": [
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, pod_status_text),
        ("Restarts", "string", 0, _pod_restarts),
        ("Age", "string", 0, _meta_age),
        ("IP", "string", 1, _g("status", "podIP")),
        ("Node", "string", 1, _g("spec", "nodeName")),
    ],
    "deployments": [
        (
            "Ready",
            "string",
            0,
            lambda d: f"{d.get('status', {}).get('readyReplicas', 0)}/{d['spec'].get('replicas', 0)}",
        ),
        ("Up-to-date", "integer", 0, lambda d: d.get("status", {}).get("updatedReplicas", 0)),
        ("Available", "integer", 0, lambda d: d.get("status", {}).get("availableReplicas", 0)),
        ("Age", "string", 0, _meta_age),
    ],
    "replicasets": [
        ("Desired", "integer", 0, lambda r: r["spec"].get("replicas", 0)),
        ("Current", "integer", 0, lambda r: r.get("status", {}).get("replicas", 0)),
        ("Ready", "integer", 0, lambda r: r.get("status", {}).get("readyReplicas", 0)),
        ("Age", "string", 0, _meta_age),
    ],
    "nodes": [
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, lambda n: "<none>"),
        ("Age", "string", 0, _meta_age),
        ("Version", "string", 0, _g("status", "nodeInfo", "kubeletVersion")),
    ],
    "services": [
        ("Type", "string", 0, _g("spec", "type")),
        ("Cluster-IP", "string", 0, _g("spec", "clusterIP")),
        ("External-IP", "string", 0, _external_ip),
        ("Port(s)", "string", 0, _ports),
        ("Age", "string", 0, _meta_age),
    ],
    "namespaces": [("Status", "string", 0, _g("status", "phase")), ("Age", "string", 0, _meta_age)],
    "endpoints": [("Endpoints", "string", 0, _endpoints), ("Age", "string", 0, _meta_age)],
    "configmaps": [
        ("Data", "integer", 0, lambda c: len(c.get("data") or {}) + len(c.get("binaryData") or {})),
        ("Age", "string", 0, _meta_age),
    ],
    "secrets": [
        ("Type", "string", 0, _g("type")),
        ("Data", "integer", 0, lambda s: len(s.get("data") or {}) + len(s.get("stringData") or {})),
        ("Age", "string", 0, _meta_age),
    ],
    "customresourcedefinitions": [("Created At", "date", 0, _g("metadata", "creationTimestamp"))],
}
EVENT_COLUMNS: list[Column] = [
    (
        "Last Seen",
        "string",
        0,
        lambda e: age(e.get("lastTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp")),
    ),
    ("Type", "string", 0, _g("type")),
    ("Reason", "string", 0, _g("reason")),
    ("Object", "string", 0, _event_object),
    ("Message", "string", 0, _g("message")),
]


def _jsonpath(obj: dict[str, Any], path: str) -> Any:
    node: Any = obj
    for key in path.strip(".").split("."):
        if "[" in key or not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _printer_getter(column: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    path = str(column["jsonPath"])
    if column.get("type") == "date":
        return lambda obj: age(_jsonpath(obj, path))
    return lambda obj: _jsonpath(obj, path)


def _columns(rt: ResourceType) -> tuple[list[Column], bool]:
    """Columns after NAME, and whether NAME is shown (events have no NAME column)."""
    if rt.plural == "events":
        return EVENT_COLUMNS, False
    if rt.plural in COLUMNS:
        return COLUMNS[rt.plural], True
    if rt.printer_columns:
        columns: list[Column] = []
        for col in rt.printer_columns:
            kind = "string" if col.get("type") == "date" else col.get("type", "string")
            columns.append((col["name"], kind, int(col.get("priority", 0)), _printer_getter(col)))
        return columns, True
    return [("Age", "string", 0, _meta_age)], True


def to_table(rt: ResourceType, objects: list[dict[str, Any]], rv: str, include: str) -> dict[str, Any]:
    columns, with_name = _columns(rt)
    definitions = []
    if with_name:
        definitions.append(
            {
                "name": "Name",
                "type": "string",
                "format": "name",
                "description": "Name must be unique within a namespace.",
                "priority": 0,
            }
        )
    definitions += [
        {"name": n, "type": t, "format": "", "description": n, "priority": p} for n, t, p, _ in columns
    ]
    rows = []
    for obj in objects:
        cells = [obj["metadata"]["name"]] if with_name else []
        cells += [getter(obj) for _, _, _, getter in columns]
        row: dict[str, Any] = {"cells": cells}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": definitions,
        "rows": rows,
    }
