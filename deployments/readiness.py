"""Waiting for a revision's pods to be Ready, and saying why they are not."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

import kube
from deployments import plan
from deployments.diagnosis import Diagnosis, diagnose
from deployments.job import Job, deploy_options, setting
from kube.labels import REVISION, topology_selector

# Causes that will not clear by waiting longer: fail fast once they persist.
DEFINITIVE = {
    "resource_name_wrong",
    "insufficient_capacity",
    "image_pull",
    "crash_loop",
    "connector_backend_missing",
    "mount_missing",
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
    logs = {}
    for pod in not_ready:
        if pod.restarts > 0 or pod.reason in ("CrashLoopBackOff", "Error"):
            try:
                logs[pod.name] = kube.pod_log_tail(conn, namespace, pod.name, lines=40)
            except kube.KubeError:
                logs[pod.name] = ""
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
    )


def wait_ready(
    job: Job,
    conn: kube.ClusterConnection,
    namespace: str,
    topology_id: int,
    revision: int,
    manifests: list[Any],
) -> list[Diagnosis] | None:
    """None once every pod of the revision is Ready; else the diagnosis of why not."""
    deployment = job.load()
    timeout, _ = deploy_options(deployment)
    poll = float(setting("DEPLOY_POLL_SECONDS", 1.0))
    fail_fast = float(setting("DEPLOY_FAIL_FAST_SECONDS", 20))
    total = plan.expected_pods(manifests)
    selector = f"{topology_selector(topology_id)},{REVISION}={revision}"
    deadline = time.monotonic() + timeout
    since = timezone.now() - timedelta(seconds=2)
    definitive_since: float | None = None
    while True:
        pods = [p for p in kube.list_pods(conn, namespace, selector) if not p.deletion_pending]
        ready = sum(1 for p in pods if p.ready)
        job.beat(pods_ready=min(ready, total), pods_total=total)
        if ready >= total:
            return None
        now = time.monotonic()
        if now >= deadline:
            return _diagnose_now(conn, namespace, pods, manifests, timed_out=True, since=since) or [
                {
                    "code": "not_ready",
                    "message": f"Only {ready}/{total} pods became Ready within {int(timeout)} s.",
                    "fix": "Check the engine logs; if the model loads slowly, raise the ready timeout.",
                    "pods": [],
                }
            ]
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
