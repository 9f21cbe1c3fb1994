"""Pods, events and logs, reduced to what an operator reads: who runs where, what is wrong, what it said."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from kube.client import ClusterConnection, request
from kube.labels import FIELD_MANAGER
from kube.retry import RetryPolicy

NO_RETRY = RetryPolicy(max_attempts=1)

# Waiting/terminated reasons that mean a container is not going to become ready by itself.
PROBLEM_REASONS = (
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "OOMKilled",
    "Error",
    "ContainerCannotRun",
)


@dataclass(frozen=True)
class PodInfo:
    name: str
    namespace: str
    ip: str
    node: str
    phase: str
    ready: bool
    reason: str  # CrashLoopBackOff / ImagePullBackOff / Unschedulable / Evicted / OOMKilled / "" when fine
    message: str
    restarts: int
    labels: dict[str, str] = field(default_factory=dict)
    container_ports: tuple[int, ...] = ()
    # the container that serves (the first declaring a port), named only when the pod has several:
    # ``pods/log`` needs a container name then
    serving_container: str | None = None
    deletion_pending: bool = False
    created: datetime | None = None
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EventInfo:
    type: str  # Normal | Warning
    reason: str
    message: str
    involved_kind: str
    involved_name: str
    count: int
    last_time: datetime | None
    namespace: str = ""


def parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def pod_info(pod: dict[str, Any]) -> PodInfo:
    """Reduce a Pod object to PodInfo (pure: tested on literal pods)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    reason, message, restarts = "", "", 0
    for cs in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        last = (cs.get("lastState") or {}).get("terminated") or {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        candidate = waiting.get("reason") or (terminated.get("reason") if terminated.get("exitCode") else "")
        if candidate and candidate not in ("ContainerCreating", "PodInitializing") and not reason:
            reason = str(candidate)
            message = str(waiting.get("message") or terminated.get("message") or last.get("reason") or "")
    if not reason and status.get("reason"):
        reason, message = str(status["reason"]), str(status.get("message") or "")
    scheduled = conditions.get("PodScheduled") or {}
    if not reason and scheduled.get("status") == "False":
        reason = str(scheduled.get("reason") or "Unschedulable")
        message = str(scheduled.get("message") or "")
    ports = tuple(
        int(p["containerPort"])
        for c in spec.get("containers") or []
        for p in c.get("ports") or []
        if isinstance(p, dict) and p.get("containerPort")
    )
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    serving = next((c for c in containers if c.get("ports")), containers[0] if containers else {})
    return PodInfo(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        ip=str(status.get("podIP") or ""),
        node=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        ready=ready,
        reason=reason,
        message=message,
        restarts=restarts,
        labels=dict(meta.get("labels") or {}),
        container_ports=ports,
        serving_container=(str(serving.get("name") or "") or None) if len(containers) > 1 else None,
        deletion_pending=bool(meta.get("deletionTimestamp")),
        created=parse_time(meta.get("creationTimestamp")),
        annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
    )


def list_pods(conn: ClusterConnection, namespace: str, label_selector: str) -> list[PodInfo]:
    """Pods in ``namespace`` matching ``label_selector``, sorted by name."""
    response = request(
        conn,
        "GET",
        f"/api/v1/namespaces/{namespace}/pods",
        query={"labelSelector": label_selector},
        action=f"list pods in {namespace}",
    )
    pods = [pod_info(item) for item in (response.json() or {}).get("items") or []]
    return sorted(pods, key=lambda p: p.name)


def event_info(event: dict[str, Any]) -> EventInfo:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    last = (
        parse_time(event.get("lastTimestamp"))
        or parse_time(event.get("eventTime"))
        or parse_time((event.get("series") or {}).get("lastObservedTime"))
        or parse_time(event.get("firstTimestamp"))
        or parse_time((event.get("metadata") or {}).get("creationTimestamp"))
    )
    return EventInfo(
        type=str(event.get("type") or "Normal"),
        reason=str(event.get("reason") or ""),
        message=str(event.get("message") or event.get("note") or ""),
        involved_kind=str(involved.get("kind") or ""),
        involved_name=str(involved.get("name") or ""),
        count=int(event.get("count") or (event.get("series") or {}).get("count") or 1),
        last_time=last,
        namespace=str((event.get("metadata") or {}).get("namespace") or ""),
    )


def list_events(
    conn: ClusterConnection, namespace: str, involved_names: set[str] | None = None
) -> list[EventInfo]:
    """Events in ``namespace`` (only those about ``involved_names`` when given), oldest first."""
    response = request(
        conn, "GET", f"/api/v1/namespaces/{namespace}/events", action=f"list events in {namespace}"
    )
    events = [event_info(item) for item in (response.json() or {}).get("items") or []]
    if involved_names is not None:
        events = [e for e in events if e.involved_name in involved_names]
    floor = datetime.min.replace(tzinfo=None)
    return sorted(events, key=lambda e: e.last_time.replace(tzinfo=None) if e.last_time else floor)


def pod_log_tail(
    conn: ClusterConnection,
    namespace: str,
    pod: str,
    lines: int = 50,
    container: str | None = None,
    previous: bool = False,
) -> str:
    """The last ``lines`` lines of a pod's log (its first container unless ``container`` is given; the
    container's run before the current one with ``previous``: where a crash loop's error is once the
    container started again)."""
    response = request(
        conn,
        "GET",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
        query={"tailLines": max(1, lines), "container": container, "previous": "true" if previous else None},
        accept="*/*",
        action=f"read the log of pod {namespace}/{pod}",
    )
    return response.data.decode("utf-8", "replace")


def pod_log_lines(
    conn: ClusterConnection,
    namespace: str,
    pod: str,
    *,
    tail_lines: int = 300,
    since_seconds: int | None = None,
    container: str | None = None,
    timeout_s: float = 2.0,
) -> list[str]:
    """The recent lines of a pod's log through ``pods/log`` (RBAC: ``get`` on ``pods/log``).

    Telemetry reads engine logs with this on every interval, so it fails fast: one attempt, a short
    deadline. ``since_seconds`` bounds what a real API server returns; the caller still de-duplicates
    against what it read before (``tail_lines`` overlaps between reads)."""
    response = request(
        conn,
        "GET",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
        query={"tailLines": max(1, tail_lines), "sinceSeconds": since_seconds, "container": container},
        accept="*/*",
        action=f"read the log of pod {namespace}/{pod}",
        timeout=(timeout_s, timeout_s),
        policy=NO_RETRY,
    )
    return response.data.decode("utf-8", "replace").splitlines()


def patch_pod_labels(
    conn: ClusterConnection, namespace: str, pod: str, labels: dict[str, str | None]
) -> None:
    """Set labels on one running pod by JSON merge patch (needs ``patch`` on ``pods``); None removes one."""
    request(
        conn,
        "PATCH",
        f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}",
        query={"fieldManager": FIELD_MANAGER},
        body={"metadata": {"labels": labels}},
        content_type="application/merge-patch+json",
        action=f"relabel pod {namespace}/{pod}",
    )
