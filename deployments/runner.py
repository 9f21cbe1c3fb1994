"""Runs one deployment job: claim → preflight → apply → wait for Ready → succeed, or diagnose and roll back.

The database decides who owns a job (a conditional UPDATE, healthchecks style), so a task delivered twice
(a worker killed mid-deploy, a broker redelivery) resumes the job instead of running it twice. Every step
is safe to repeat: server-side apply converges on identical objects.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from django.db import InterfaceError, OperationalError

import kube
from deployments import plan
from deployments.diagnosis import Diagnosis
from deployments.job import (
    Cancelled,
    Job,
    LostClaim,
    claim,
    connection,
    deploy_options,
    keep_failed_first_deploy,
)
from deployments.models import Kind, State
from deployments.readiness import wait_ready
from deployments.removal import run_delete
from deployments.services import deployment_step_add
from kube.immutable import IMMUTABLE_FIELDS, immutable_changes
from kube.labels import MANAGED_BY, MANAGED_BY_VALUE

logger = logging.getLogger(__name__)

__all__ = ["claim", "run"]


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
            run_delete(job)
        else:
            _run_rollout(job)
    except LostClaim:
        logger.warning("deployment %s: claim lost to another worker", deployment_id)
        return "lost"
    except (OperationalError, InterfaceError):
        # The database went away mid-job: the job is not at fault. The task retries with back-off and
        # resumes it (every step is safe to repeat) once the database answers again.
        logger.warning("deployment %s: database unavailable; the job resumes when it is back", deployment_id)
        raise
    except Exception as error:
        logger.exception("deployment %s failed unexpectedly", deployment_id)
        with contextlib.suppress(LostClaim, RuntimeError):
            job.move(State.FAILED, f"Failed: {error}", error=str(error)[:2000])
    return "claimed"


# --- rollout -------------------------------------------------------------------------------------------


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
        conn = connection(deployment)
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
            _recreate_immutable(job, conn, topology.pk, manifests)
            kube.apply_objects(conn, manifests)
        except kube.KubeError as error:
            _fail(job, str(error), [_apply_diagnosis(error)])
            return
        total = plan.expected_pods(manifests)
        job.move(
            State.WAITING,
            f"Waiting for revision {revision.number} to roll out and its {total} pods to be Ready",
            pods_total=total,
        )
        diagnosis = wait_ready(job, conn, topology.namespace, topology.pk, manifests)
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
    override = str((deployment.params or {}).get("preflight_override") or "")
    if errors and override:
        deployment_step_add(
            deployment=job.load(),
            message=f"Preflight found {len(errors)} blocking problem{'s' if len(errors) != 1 else ''}; "
            f"deploying anyway, as {deployment.requested_by_label} chose ({override}): "
            + "; ".join(f.message for f in errors),
            detail={"overridden": [{"message": f.message, "fix": f.fix} for f in errors]},
        )
        errors = []
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


def _recreate_immutable(
    job: Job, conn: kube.ClusterConnection, topology_id: int, manifests: list[Any]
) -> None:
    """Delete the topology's objects whose immutable fields the revision changes, so the apply that
    follows creates them anew instead of meeting the API server's 422 halfway through a deploy."""
    for obj in manifests:
        if obj.get("kind") not in IMMUTABLE_FIELDS:
            continue
        api_version, kind, namespace, name = plan.object_key(obj)
        live = kube.get_object(conn, api_version, kind, namespace or None, name)
        changes = immutable_changes(live, obj)
        if not changes:
            continue
        if not plan.owned_by_topology(live, topology_id):
            raise kube.KubeError(
                f"{kind}/{name} exists, is not managed by this topology, and its "
                f"{', '.join(changes)} cannot be changed in place; delete it or choose another name"
            )
        kube.delete_object(conn, api_version, kind, namespace or None, name)
        deployment_step_add(
            deployment=job.load(),
            message=f"{kind}/{name}: {', '.join(changes)} cannot change in place (immutable); "
            "deleted to be created again",
        )


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
    _, auto = deploy_options(deployment)
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
    if previous is None and deployment.kind in (Kind.DEPLOY, Kind.SCALE) and deployment.revision is not None:
        why += "; " + _remove_failed_first_deploy(job, list(deployment.revision.manifests))
    job.move(State.FAILED, f"Deployment failed; {why}")


def _remove_failed_first_deploy(job: Job, manifests: list[Any]) -> str:
    """A failed first deploy leaves nothing running (pods holding accelerators, a half-made route) unless
    the topology's deploy policy keeps it for inspection. Only objects carrying the topology's labels go."""
    deployment = job.load()
    assert deployment.topology is not None
    if keep_failed_first_deploy(deployment):
        deployment_step_add(
            deployment=deployment,
            message="Kept the failed first deploy's objects in the cluster, as the deploy policy says",
        )
        return "its objects were kept for inspection (deploy policy)"
    try:
        conn = connection(deployment)
        removed = []
        for api_version, kind, namespace, name in plan.prune_keys(manifests, []):
            live = kube.get_object(conn, api_version, kind, namespace or None, name)
            if plan.owned_by_topology(live, deployment.topology.pk) and kube.delete_object(
                conn, api_version, kind, namespace or None, name
            ):
                removed.append(f"{kind}/{name}")
    except kube.KubeError as error:
        deployment_step_add(deployment=job.load(), message=f"Could not remove what was applied: {error}")
        return f"removing what it applied failed ({error.message}); delete the topology to clean up"
    deployment_step_add(
        deployment=job.load(),
        message=f"Removed {len(removed)} objects the failed first deploy had applied"
        + (": " + ", ".join(removed) if removed else ""),
        detail={"removed": removed},
    )
    return f"removed the {len(removed)} objects it had applied"


def _rollback(job: Job, target: Any, *, reason: str) -> None:
    deployment = job.load()
    assert deployment.topology is not None
    topology = deployment.topology
    conn = connection(deployment)
    manifests = list(target.manifests)
    try:
        _recreate_immutable(job, conn, topology.pk, manifests)
        kube.apply_objects(conn, manifests)
        job.beat(pods_ready=0, pods_total=plan.expected_pods(manifests))
        problem = wait_ready(job, conn, topology.namespace, topology.pk, manifests)
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
