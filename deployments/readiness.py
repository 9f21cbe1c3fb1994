"""Waiting for a revision to run (workloads rolled out, expected pods Ready), and saying why it does not."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

import kube
from deployments import plan, progress
from deployments.diagnosis import Diagnosis, diagnose, names_an_exception
from deployments.job import Job, deploy_options, setting
from kube.labels import topology_selector

# Causes that will not clear by waiting longer: fail fast once they persist.
DEFINITIVE = {
    "resource_name_wrong",
    "insufficient_capacity",
    "image_pull",
    "crash_loop",
    "connector_backend_missing",
    "mount_missing",
    "engine_argument_rejected",
    "secret_missing",
    "configmap_missing",
    "volume_claim_missing",
}


def _node_free(conn: kube.ClusterConnection) -> dict[str, int]:
    free: dict[str, int] = {}
    for node in kube.list_nodes(conn):
        if not node.ready or node.unschedulable:
            continue
        for name, amount in node.allocatable.items():
            free[name] = free.get(name, 0) + max(0, amount - node.in_use.get(name, 0))
    return free


def _diagnose_now(
    conn: kube.ClusterConnection,
    namespace: str,
    pods: list[kube.PodInfo],
    manifests: list[Any],
    timed_out: bool,
    since: datetime,
) -> list[Diagnosis]:
    not_ready = [p for p in pods if not p.ready]
    names = {p.name for p in not_ready}
    # Pods of a new revision often reuse the old pods' names: only this attempt's events count.
    listed = kube.list_events(conn, namespace, names) if names else []
    events = [e for e in listed if e.last_time is None or e.last_time >= since]
    logs = {pod.name: crash_log(conn, namespace, pod) for pod in not_ready if _crashed(pod)}
    node_resources: dict[str, int] = {}
    if any(e.reason == "FailedScheduling" for e in events):
        node_resources = _node_free(conn)
    return diagnose(
        pods=not_ready,
        events=events,
        logs=logs,
        node_resources=node_resources,
        requested=plan.requested_resources(manifests),
        timed_out=timed_out,
        namespace=namespace,
    )


def _workloads(conn: kube.ClusterConnection, manifests: list[Any]) -> list[progress.WorkloadProgress]:
    out = []
    for obj in manifests:
        if plan.is_workload(obj):
            meta = obj.get("metadata") or {}
            live = kube.get_object(conn, obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
            out.append(progress.workload_progress(obj, live))
    return out


def _not_ready(ready: int, total: int, timeout: float, lagging: list[progress.WorkloadProgress]) -> Diagnosis:
    if ready >= total and lagging:
        return {
            "code": "not_ready",
            "message": f"Every pod is Ready, but within {int(timeout)} s the workloads did not finish "
            "rolling out: " + "; ".join(w.text for w in lagging) + ".",
            "fix": "Check that the workload controller (Kthena for the kthena backend) runs in the cluster "
            "and look at the workloads' status; deploy again once it has caught up.",
            "pods": [],
        }
    return {
        "code": "not_ready",
        "message": f"Only {ready}/{total} pods became Ready within {int(timeout)} s.",
        "fix": "Check the engine logs; if the model loads slowly, raise the ready timeout.",
        "pods": [],
    }


def wait_ready(
    job: Job,
    conn: kube.ClusterConnection,
    namespace: str,
    topology_id: int,
    manifests: list[Any],
) -> list[Diagnosis] | None:
    """None once the revision runs; else the diagnosis of why not.

    Runs means: every workload reports the latest generation observed and all its replicas updated and
    Ready, and the pods the revision expects (topology + role + template hash) are Ready. Pods of a role
    whose template did not change count from the start, so a scale waits for the new pods only.
    """
    deployment = job.load()
    timeout, _ = deploy_options(deployment)
    poll = float(setting("DEPLOY_POLL_SECONDS", 1.0))
    fail_fast = float(setting("DEPLOY_FAIL_FAST_SECONDS", 20))
    sets = plan.pod_sets(manifests)
    total = sum(s.count for s in sets)
    selector = topology_selector(topology_id)
    deadline = time.monotonic() + timeout
    since = timezone.now() - timedelta(seconds=2)
    definitive_since: float | None = None
    while True:
        pods = progress.pods_of(kube.list_pods(conn, namespace, selector), sets)
        ready = progress.ready_pods(pods, sets)
        job.beat(pods_ready=ready, pods_total=total)
        lagging: list[progress.WorkloadProgress] = []
        if ready >= total:
            lagging = [w for w in _workloads(conn, manifests) if not w.done]
            if not lagging:
                return None
        now = time.monotonic()
        if now >= deadline:
            if ready < total:
                lagging = [w for w in _workloads(conn, manifests) if not w.done]
            found = _diagnose_now(conn, namespace, pods, manifests, timed_out=True, since=since)
            return found or [_not_ready(ready, total, timeout, lagging)]
        troubled = any(p.reason or p.restarts or p.phase == "Pending" for p in pods if not p.ready)
        if troubled:
            found = _diagnose_now(conn, namespace, pods, manifests, timed_out=False, since=since)
            if any(d["code"] in DEFINITIVE for d in found):
                definitive_since = definitive_since or now
                if now - definitive_since >= fail_fast:
                    return [d for d in found if d["code"] in DEFINITIVE]
            else:
                definitive_since = None
        time.sleep(poll)


def _crashed(pod: kube.PodInfo) -> bool:
    return pod.restarts > 0 or pod.reason in ("CrashLoopBackOff", "Error")


def crash_log(conn: kube.ClusterConnection, namespace: str, pod: kube.PodInfo) -> str:
    """The log that says why the pod's engine exits: the current run's, or, when that one has started
    again and says nothing wrong yet (an engine loading its model), the run before it. A real vLLM
    prints its traceback in its last ~20 lines, after tens of lines of start-up."""
    try:
        current = kube.pod_log_tail(conn, namespace, pod.name, lines=80)
    except kube.KubeError:
        current = ""
    if names_an_exception(current) or pod.restarts == 0:
        return current
    try:
        previous = kube.pod_log_tail(conn, namespace, pod.name, lines=80, previous=True)
    except kube.KubeError:
        return current
    return previous if names_an_exception(previous) or not current else current
