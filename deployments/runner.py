"""Runs one deployment job: claim → preflight → apply → wait for Ready → succeed, or diagnose and roll back.

The database decides who owns a job (a conditional UPDATE, healthchecks style), so a task delivered twice
(a worker killed mid-deploy, a broker redelivery) resumes the job instead of running it twice. Every step
is safe to repeat: server-side apply converges on identical objects.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

import kube
from deployments import plan
from deployments.diagnosis import Diagnosis, diagnose
from deployments.models import ACTIVE_STATES, Deployment, DeployPolicy, Kind, State, can_move
from deployments.services import deployment_step_add
from kube.labels import MANAGED_BY, MANAGED_BY_VALUE, REVISION, topology_selector

logger = logging.getLogger(__name__)

# Causes that will not clear by waiting longer: fail fast once they persist.
DEFINITIVE = {
    "resource_name_wrong",
    "insufficient_capacity",
    "image_pull",
    "crash_loop",
    "connector_backend_missing",
    "mount_missing",
}


class LostClaim(Exception):
    """Another worker owns the job now (ours was presumed dead); stop without touching it."""


class Cancelled(Exception):
    """An operator cancelled the job."""


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


@dataclass
class Job:
    deployment_id: int
    worker: str
    last_progress: tuple[int, int] = field(default=(-1, -1))

    def load(self) -> Deployment:
        return Deployment.objects.select_related(
            "topology", "topology__cluster", "revision", "previous_revision", "rolled_back_to"
        ).get(pk=self.deployment_id)

    def _mine(self) -> Any:
        return Deployment.objects.filter(
            pk=self.deployment_id, claimed_by=self.worker, state__in=ACTIVE_STATES
        )

    def beat(self, *, check_cancel: bool = True, **fields: Any) -> Deployment:
        """Refresh the heartbeat (and progress fields); raise if the claim was lost or a cancel asked."""
        if not self._mine().update(heartbeat=timezone.now(), **fields):
            raise LostClaim(self.deployment_id)
        deployment = self.load()
        if check_cancel and deployment.cancel_requested:
            raise Cancelled()
        progress = (deployment.pods_ready, deployment.pods_total)
        if progress != self.last_progress and "pods_total" in fields:
            self.last_progress = progress
            deployment_step_add(
                deployment=deployment,
                message=f"{progress[0]}/{progress[1]} pods ready",
                detail={"progress": True},
            )
        return deployment

    def move(
        self, state: str, message: str, detail: dict[str, Any] | None = None, **fields: Any
    ) -> Deployment:
        current = self.load()
        if not can_move(current.state, state):
            raise RuntimeError(f"illegal deployment move {current.state} → {state}")
        now = timezone.now()
        extra: dict[str, Any] = {"finished": now} if state not in ACTIVE_STATES else {}
        if not self._mine().update(state=state, heartbeat=now, **extra, **fields):
            raise LostClaim(self.deployment_id)
        deployment = self.load()
        deployment_step_add(deployment=deployment, message=message, detail=detail)
        return deployment


def claim(deployment_id: int, worker: str) -> str:
    """Take the job: "claimed", "busy" (a live worker holds it), "done" (final) or "missing"."""
    now = timezone.now()
    stale = now - timedelta(seconds=float(_setting("DEPLOY_HEARTBEAT_STALE_SECONDS", 60)))
    taken = (
        Deployment.objects.filter(pk=deployment_id, state__in=ACTIVE_STATES)
        .filter(Q(claimed_by="") | Q(claimed_by=worker) | Q(heartbeat__isnull=True) | Q(heartbeat__lt=stale))
        .update(
            claimed_by=worker, heartbeat=now, attempts=F("attempts") + 1, started=Coalesce("started", now)
        )
    )
    if taken:
        return "claimed"
    row = Deployment.objects.filter(pk=deployment_id).values_list("state", flat=True).first()
    if row is None:
        return "missing"
    return "busy" if row in ACTIVE_STATES else "done"


def run(deployment_id: int, *, worker: str) -> str:
    """Run (or resume) one deployment. Returns the claim outcome; "claimed" jobs run to a final state."""
    outcome = claim(deployment_id, worker)
    if outcome != "claimed":
        return outcome
    job = Job(deployment_id, worker)
    deployment = job.load()
    if deployment.attempts > 1:
        deployment_step_add(
            deployment=deployment,
            message=f"Resumed by {worker} (attempt {deployment.attempts}) in state {deployment.state}",
        )
    try:
        if deployment.kind == Kind.DELETE:
            _run_delete(job)
        else:
            _run_rollout(job)
    except LostClaim:
        logger.warning("deployment %s: claim lost to another worker", deployment_id)
        return "lost"
    except Exception as error:
        logger.exception("deployment %s failed unexpectedly", deployment_id)
        with contextlib.suppress(LostClaim, RuntimeError):
            job.move(State.FAILED, f"Failed: {error}", error=str(error)[:2000])
    return "claimed"


# --- rollout -------------------------------------------------------------------------------------------


def _deploy_options(deployment: Deployment) -> tuple[float, bool]:
    """(ready timeout in seconds, automatic rollback) from the topology's policy, else the environment."""
    found = DeployPolicy.objects.filter(topology=deployment.topology).first() if deployment.topology else None
    policy = found or DeployPolicy()
    return float(policy.effective_ready_timeout_seconds), policy.effective_auto_rollback


def _connection(deployment: Deployment) -> kube.ClusterConnection:
    from clusters.selectors import cluster_connection

    assert deployment.topology is not None
    return cluster_connection(deployment.topology.cluster)


def _run_rollout(job: Job) -> None:
    deployment = job.load()
    topology, revision = deployment.topology, deployment.revision
    if topology is None or revision is None:
        job.move(State.FAILED, "Failed: the topology or revision no longer exists", error="topology gone")
        return
    if deployment.rolled_back_to is not None:  # resumed in the middle of an automatic rollback
        _rollback(job, deployment.rolled_back_to, reason=deployment.error)
        return
    try:
        conn = _connection(deployment)
        if deployment.state in (State.QUEUED, State.PREFLIGHT) and not _preflight(job):
            return
        manifests = list(revision.manifests)
        detail = {"objects": [plan.key_text(plan.object_key(o)) for o in manifests]}
        if job.load().state == State.WAITING:  # resumed: apply again (a no-op when already applied)
            deployment_step_add(
                deployment=job.load(),
                message=f"Re-applying {len(manifests)} objects of revision {revision.number}",
                detail=detail,
            )
        else:
            job.move(
                State.APPLYING, f"Applying {len(manifests)} objects of revision {revision.number}", detail
            )
        try:
            _ensure_namespace(job, conn, topology.namespace)
            kube.apply_objects(conn, manifests)
        except kube.KubeError as error:
            _fail(job, str(error), [_apply_diagnosis(error)])
            return
        total = plan.expected_pods(manifests)
        job.move(
            State.WAITING,
            f"Waiting for {total} pods of revision {revision.number} to be Ready",
            pods_total=total,
        )
        diagnosis = _wait_ready(job, conn, topology.namespace, topology.pk, revision.number, manifests)
    except Cancelled:
        _fail(job, "cancelled by an operator", [])
        return
    except kube.KubeError as error:
        _fail(job, str(error), [_apply_diagnosis(error)])
        return
    if diagnosis is None:
        _succeed(job, conn)
    else:
        _fail(job, diagnosis[0]["message"] if diagnosis else "pods did not become Ready", diagnosis)


def _preflight(job: Job) -> bool:
    from topologies.services import topology_preflight

    deployment = job.move(State.PREFLIGHT, "Running preflight checks")
    assert deployment.topology is not None and deployment.revision is not None
    findings = topology_preflight(topology=deployment.topology, revision=deployment.revision)
    errors = [f for f in findings if f.level == "error"]
    warnings = [f for f in findings if f.level != "error"]
    if errors:
        diagnosis: list[Diagnosis] = [
            {"code": getattr(f, "code", "preflight"), "message": f.message, "fix": f.fix, "pods": []}
            for f in errors
        ]
        job.move(
            State.FAILED,
            f"Preflight found {len(errors)} blocking problem{'s' if len(errors) != 1 else ''}; "
            "nothing was applied",
            error="; ".join(f.message for f in errors)[:2000],
            diagnosis=diagnosis,
        )
        return False
    if warnings:
        deployment_step_add(
            deployment=job.load(),
            message=f"Preflight passed with {len(warnings)} warning{'s' if len(warnings) != 1 else ''}: "
            + "; ".join(f.message for f in warnings),
            detail={"warnings": [{"message": f.message, "fix": f.fix} for f in warnings]},
        )
    return True


def _ensure_namespace(job: Job, conn: kube.ClusterConnection, namespace: str) -> None:
    if kube.get_object(conn, "v1", "Namespace", None, namespace) is not None:
        return
    labels = {MANAGED_BY: MANAGED_BY_VALUE}
    kube.apply_objects(
        conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}]
    )
    deployment_step_add(deployment=job.load(), message=f"Created namespace {namespace}")


def _apply_diagnosis(error: kube.KubeError) -> Diagnosis:
    fix = "Correct the topology so the cluster accepts its objects, then deploy again."
    if isinstance(error, kube.KubeNotInstalled):
        fix = (
            "Install the Kthena CRDs in the cluster, or switch the topology to the plain Deployments backend."
        )
    elif isinstance(error, kube.KubeUnreachable):
        fix = "Check the cluster's health on its page; deploy again once it is reachable."
    elif isinstance(error, (kube.KubeForbidden, kube.KubeUnauthorized)):
        fix = "Give Tandem's credentials the permissions listed on the cluster page."
    elif isinstance(error, kube.KubeConflict):
        fix = "Another field manager owns these fields; remove or rename the conflicting object."
    return {"code": "apply_refused", "message": error.message, "fix": fix, "pods": []}


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


def _wait_ready(
    job: Job,
    conn: kube.ClusterConnection,
    namespace: str,
    topology_id: int,
    revision: int,
    manifests: list[Any],
) -> list[Diagnosis] | None:
    """None once every pod of the revision is Ready; else the diagnosis of why not."""
    deployment = job.load()
    timeout, _ = _deploy_options(deployment)
    poll = float(_setting("DEPLOY_POLL_SECONDS", 1.0))
    fail_fast = float(_setting("DEPLOY_FAIL_FAST_SECONDS", 20))
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


def _prune(job: Job, conn: kube.ClusterConnection, topology_id: int, old: list[Any], new: list[Any]) -> None:
    keys = plan.prune_keys(old, new)
    removed = []
    for api_version, kind, namespace, name in keys:
        live = kube.get_object(conn, api_version, kind, namespace or None, name)
        if plan.owned_by_topology(live, topology_id) and kube.delete_object(
            conn, api_version, kind, namespace or None, name
        ):
            removed.append(f"{kind}/{name}")
    if removed:
        deployment_step_add(
            deployment=job.load(),
            message=f"Pruned {len(removed)} objects no longer in the revision: " + ", ".join(removed),
        )


def _succeed(job: Job, conn: kube.ClusterConnection) -> None:
    from topologies.models import Topology

    deployment = job.load()
    assert deployment.topology is not None and deployment.revision is not None
    previous = deployment.previous_revision
    if previous is not None and previous.pk != deployment.revision.pk:
        _prune(
            job, conn, deployment.topology.pk, list(previous.manifests), list(deployment.revision.manifests)
        )
    Topology.objects.filter(pk=deployment.topology.pk).update(
        deployed_revision=deployment.revision, drift_state="in_sync", drift_detail={}
    )
    job.move(State.SUCCEEDED, f"Revision {deployment.revision.number} is running: all pods Ready")


def _fail(job: Job, error: str, diagnosis: list[Diagnosis]) -> None:
    deployment = job.load()
    _, auto = _deploy_options(deployment)
    previous = deployment.previous_revision
    job.beat(check_cancel=False, error=error[:2000], diagnosis=diagnosis)
    deployment_step_add(deployment=job.load(), message=f"Failed: {error}", detail={"diagnosis": diagnosis})
    can_roll_back = (
        previous is not None
        and deployment.revision is not None
        and previous.pk != deployment.revision.pk
        and deployment.kind != Kind.REAPPLY
    )
    if auto and can_roll_back:
        assert previous is not None
        job.beat(check_cancel=False, rolled_back_to=previous, cancel_requested=False)
        deployment_step_add(deployment=job.load(), message=f"Rolling back to revision {previous.number}")
        _rollback(job, previous, reason=error)
        return
    why = "automatic rollback is off" if not auto else "there is no earlier good revision to return to"
    job.move(State.FAILED, f"Deployment failed; {why}")


def _rollback(job: Job, target: Any, *, reason: str) -> None:
    deployment = job.load()
    assert deployment.topology is not None
    topology = deployment.topology
    conn = _connection(deployment)
    manifests = list(target.manifests)
    try:
        kube.apply_objects(conn, manifests)
        job.beat(pods_ready=0, pods_total=plan.expected_pods(manifests))
        problem = _wait_ready(job, conn, topology.namespace, topology.pk, target.number, manifests)
    except Cancelled:
        problem = [{"code": "cancelled", "message": "rollback cancelled", "fix": "", "pods": []}]
    except kube.KubeError as error:
        problem = [_apply_diagnosis(error)]
    if problem is None:
        failed = deployment.revision
        if failed is not None:
            _prune(job, conn, topology.pk, list(failed.manifests), manifests)
        job.move(
            State.ROLLED_BACK,
            f"Rolled back: revision {target.number} is running again; revision {deployment.revision_number} "
            "failed (see the diagnosis)",
        )
        return
    job.move(
        State.FAILED,
        f"Rollback to revision {target.number} also failed: {problem[0]['message']}",
        error=f"{reason}; rollback to revision {target.number} also failed: {problem[0]['message']}"[:2000],
    )


# --- delete --------------------------------------------------------------------------------------------


def _run_delete(job: Job) -> None:
    from topologies.models import Revision, Topology

    deployment = job.load()
    topology = deployment.topology
    if topology is None:
        job.move(State.SUCCEEDED, "The topology was already deleted")
        return
    conn = _connection(deployment)
    objects: dict[tuple[str, str, str, str], Any] = {}
    for manifests in Revision.objects.filter(topology=topology).values_list("manifests", flat=True):
        for obj in manifests or []:
            objects.setdefault(plan.object_key(obj), obj)
    keys = list(reversed(list(objects)))
    job.move(State.APPLYING, f"Deleting {len(keys)} objects from the cluster")
    removed = []
    try:
        for api_version, kind, namespace, name in keys:
            live = kube.get_object(conn, api_version, kind, namespace or None, name)
            if plan.owned_by_topology(live, topology.pk) and kube.delete_object(
                conn, api_version, kind, namespace or None, name
            ):
                removed.append(f"{kind}/{name}")
        job.move(State.WAITING, f"Deleted {len(removed)} objects; waiting for the pods to go", pods_total=0)
        deadline = time.monotonic() + min(120.0, _deploy_options(deployment)[0])
        while True:
            left = kube.list_pods(conn, topology.namespace, topology_selector(topology.pk))
            job.beat(pods_ready=len(left))
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(float(_setting("DEPLOY_POLL_SECONDS", 1.0)))
    except kube.KubeError as error:
        job.move(State.FAILED, f"Failed: {error}", error=str(error)[:2000])
        return
    except Cancelled:
        job.move(State.FAILED, "Cancelled by an operator; some objects may remain", error="cancelled")
        return
    job.move(State.SUCCEEDED, f"Deleted topology {topology.name} and {len(removed)} cluster objects")
    from audit.services import audit_record

    audit_record(action="topology.deleted", target=topology, detail={"objects": removed})
    Topology.objects.filter(pk=topology.pk).delete()
