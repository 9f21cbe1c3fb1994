"""Writes: start deploy / rollback / scale / re-apply / delete jobs, cancel one, record drift."""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from controlplane.broadcast import broadcast_on_commit, topology_group
from controlplane.redis_guard import require_broker
from deployments.drift import Difference, manifest_differences, object_key
from deployments.models import ACTIVE_STATES, Deployment, DeploymentStep, DeployPolicy, Kind, State

if TYPE_CHECKING:
    from topologies.models import Revision, Topology

logger = logging.getLogger(__name__)
ROLES = ("prefill", "decode")


def deployment_event(deployment: Deployment, *, message: str = "") -> dict[str, Any]:
    """The websocket payload for a deployment change (small, JSON-safe)."""
    return {
        "kind": "deployment",
        "id": deployment.pk,
        "topology": deployment.topology_id,
        "deployment_kind": deployment.kind,
        "state": deployment.state,
        "state_label": deployment.get_state_display(),
        "revision": deployment.revision_number,
        "ready": deployment.pods_ready,
        "total": deployment.pods_total,
        "percent": deployment.progress_percent,
        "message": message,
        "diagnosis": deployment.diagnosis,
    }


def deployment_step_add(
    *, deployment: Deployment, message: str, detail: dict[str, Any] | None = None
) -> DeploymentStep:
    """Append a timeline row in the deployment's current state and push it to the topology's page."""
    step = DeploymentStep.objects.create(
        deployment=deployment, state=deployment.state, message=message, detail=detail or {}
    )
    if deployment.topology_id is not None:
        broadcast_on_commit(
            topology_group(deployment.topology_id), deployment_event(deployment, message=message)
        )
    return step


def _running_conflict(topology: Topology) -> Conflict:
    running = Deployment.objects.filter(topology=topology, state__in=ACTIVE_STATES).first()
    if running is None:  # it finished between the insert and this read
        return Conflict("another deployment of this topology started at the same moment; try again")
    return Conflict(
        f"the {running.describe()} is {running.get_state_display().lower()}; wait for it or cancel it",
        code="deployment_active",
        fields={"topology": [f"the {running.describe()} is still running; wait for it or cancel it first"]},
    )


def _actor_label(actor: Any) -> str:
    if actor is not None and getattr(actor, "is_authenticated", False):
        return str(actor.get_username())
    return "system"


@transaction.atomic
def deployment_start(
    *,
    topology: Topology,
    revision: Revision | None = None,
    kind: str = Kind.DEPLOY,
    actor: Any,
    source_ip: str | None,
    params: dict[str, Any] | None = None,
    override_preflight: str = "",
) -> Deployment:
    """Queue a deployment job; the runner picks it up after commit. 409 when one is already active.

    ``override_preflight``: the operator's reason to deploy although preflight blocks it (audited)."""
    from topologies.models import Topology as TopologyModel

    override_preflight = override_preflight.strip()
    if override_preflight:
        params = {**(params or {}), "preflight_override": override_preflight[:300]}
    if kind not in Kind.values:
        raise DomainError(f"unknown deployment kind {kind!r}", fields={"kind": [f"use one of {Kind.values}"]})
    require_broker(what=f"the {kind} was not started")
    # The caller's object may be stale (revisions saved since it was read): decide on the stored row.
    topology = TopologyModel.objects.select_related("current_revision", "deployed_revision").get(
        pk=topology.pk
    )
    if revision is None and kind != Kind.DELETE:
        revision = topology.current_revision
    if revision is None and kind != Kind.DELETE:
        raise DomainError(
            "the topology has no revision to deploy",
            code="no_revision",
            fields={"revision": ["save the topology first so it has a revision"]},
        )
    if revision is not None and revision.topology_id != topology.pk:
        raise DomainError(
            f"revision {revision.number} does not belong to topology {topology.name}",
            fields={"revision": ["pick a revision of this topology"]},
        )
    try:
        with transaction.atomic():
            deployment = Deployment.objects.create(
                topology=topology,
                topology_name=topology.name,
                revision=revision,
                revision_number=revision.number if revision is not None else None,
                kind=kind,
                params=params or {},
                previous_revision=topology.deployed_revision,
                requested_by=actor if getattr(actor, "is_authenticated", False) else None,
                requested_by_label=_actor_label(actor),
                source_ip=source_ip,
            )
    except IntegrityError:
        raise _running_conflict(topology) from None
    deployment_step_add(deployment=deployment, message=f"Queued by {deployment.requested_by_label}")
    audit_record(
        action=f"topology.{kind}",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={"deployment": deployment.pk, "revision": deployment.revision_number, **(params or {})},
    )
    if override_preflight:
        audit_record(
            action="topology.preflight_override",
            actor=actor,
            target=topology,
            source_ip=source_ip,
            detail={
                "deployment": deployment.pk,
                "revision": deployment.revision_number,
                "reason": override_preflight,
            },
        )
    transaction.on_commit(lambda: deployment_enqueue(deployment_id=deployment.pk))
    return deployment


def deployment_enqueue(*, deployment_id: int) -> bool:
    """Hand a committed job to the workers. If Redis went away between the check and the commit, the job
    stays queued and says so; the reaper sends it again once Redis is back. Returns whether it was sent."""
    import redis
    from kombu.exceptions import OperationalError

    from deployments.tasks import run_deployment

    try:
        run_deployment.delay(deployment_id)
    except (OperationalError, redis.RedisError) as error:  # unreachable, or refusing writes (out of memory)
        logger.warning("deployment %s: not handed to a worker yet: %s", deployment_id, error)
        deployment = Deployment.objects.filter(pk=deployment_id).first()
        if deployment is not None:
            deployment_step_add(
                deployment=deployment,
                message="Saved, but Redis did not take the job; it starts when Redis is back",
                detail={"error": str(error)[:500]},
            )
        return False
    return True


def scaled_spec(spec: dict[str, Any], *, role: str, replicas: int) -> dict[str, Any]:
    """The topology spec with one role's replica count changed (pure)."""
    if role not in ROLES:
        raise DomainError(f"unknown role {role!r}", fields={"role": ["use prefill or decode"]})
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise DomainError(
            "replicas must be a whole number ≥ 0", fields={"replicas": ["use 0 or more, e.g. 2"]}
        )
    new = copy.deepcopy(spec)
    roles = new.setdefault("roles", {})
    roles.setdefault(role, {})["replicas"] = replicas
    return new


@transaction.atomic
def topology_scale_start(
    *, topology: Topology, role: str, replicas: int, actor: Any, source_ip: str | None
) -> Deployment:
    """Save a new revision with the role's replicas changed, then deploy it."""
    from topologies.models import Topology as TopologyModel
    from topologies.services import topology_update
    from topologies.spec import SpecError

    require_broker(what="the scale was not started")
    locked = TopologyModel.objects.select_for_update().get(pk=topology.pk)
    if Deployment.objects.filter(topology=locked, state__in=ACTIVE_STATES).exists():
        raise _running_conflict(locked)
    current = locked.spec.get("roles", {}).get(role, {}).get("replicas") if role in ROLES else None
    new_spec = scaled_spec(locked.spec, role=role, replicas=replicas)
    if current == replicas:
        raise DomainError(
            f"{role} already runs {replicas} replicas", fields={"replicas": ["choose a different number"]}
        )
    try:
        updated = topology_update(
            topology=locked,
            spec=new_spec,
            actor=actor,
            message=f"scale {role} to {replicas} replicas",
            source_ip=source_ip,
        )
    except SpecError as error:
        raise DomainError(
            "the scaled topology is not valid", code="invalid", fields=dict(error.errors)
        ) from None
    fresh = TopologyModel.objects.get(pk=locked.pk) if not isinstance(updated, TopologyModel) else updated
    return deployment_start(
        topology=fresh,
        revision=fresh.current_revision,
        kind=Kind.SCALE,
        actor=actor,
        source_ip=source_ip,
        params={"role": role, "replicas": replicas, "from": current},
    )


@transaction.atomic
def topology_reapply_start(*, topology: Topology, actor: Any, source_ip: str | None) -> Deployment:
    """Re-apply the deployed revision to undo drift."""
    revision = topology.deployed_revision or topology.current_revision
    return deployment_start(
        topology=topology, revision=revision, kind=Kind.REAPPLY, actor=actor, source_ip=source_ip
    )


@transaction.atomic
def topology_delete_start(*, topology: Topology, actor: Any, source_ip: str | None) -> Deployment:
    """Delete the topology's cluster objects, then the topology itself."""
    return deployment_start(
        topology=topology,
        revision=topology.deployed_revision,
        kind=Kind.DELETE,
        actor=actor,
        source_ip=source_ip,
    )


@transaction.atomic
def deployment_cancel(*, deployment: Deployment, actor: Any, source_ip: str | None) -> Deployment:
    """Ask the runner to stop; a queued job stops at once, a running one at its next check."""
    locked = Deployment.objects.select_for_update().get(pk=deployment.pk)
    if locked.state not in ACTIVE_STATES:
        raise Conflict(
            f"the {locked.describe()} already {locked.get_state_display().lower()}; nothing to cancel",
            code="not_active",
        )
    locked.cancel_requested = True
    locked.save(update_fields=["cancel_requested"])
    deployment_step_add(deployment=locked, message=f"Cancel requested by {_actor_label(actor)}")
    if locked.topology is not None:
        audit_record(
            action="deployment.cancel",
            actor=actor,
            target=locked.topology,
            source_ip=source_ip,
            detail={"deployment": locked.pk},
        )
    return locked


@transaction.atomic
def topology_drift_record(*, topology: Topology, differences: list[dict[str, Any]]) -> bool:
    """Store the drift check's result; True when the state changed."""
    from topologies.models import Topology as TopologyModel

    require_broker(what="the scale was not started")
    locked = TopologyModel.objects.select_for_update().get(pk=topology.pk)
    state = "drifted" if differences else "in_sync"
    texts = [str(d["text"]) for d in differences][:100]
    detail: dict[str, Any] = {
        "checked": timezone.now().isoformat(),
        "revision": locked.deployed_revision.number if locked.deployed_revision else None,
        "differences": texts,
    }
    changed = locked.drift_state != state
    locked.drift_state = state
    locked.drift_detail = detail
    locked.save(update_fields=["drift_state", "drift_detail"])
    if changed:
        broadcast_on_commit(
            topology_group(locked.pk), {"kind": "drift", "topology": locked.pk, "state": state, **detail}
        )
        audit_record(action=f"topology.{state}", target=locked, detail={"differences": texts[:10]})
    return changed


def topology_drift_check(*, topology: Topology) -> list[Difference]:
    """Compare the live objects with the deployed revision's manifests and record the result."""
    import kube
    from clusters.selectors import cluster_connection

    revision = topology.deployed_revision
    if revision is None or Deployment.objects.filter(topology=topology, state__in=ACTIVE_STATES).exists():
        return []
    conn = cluster_connection(topology.cluster)
    live: dict[str, dict[str, Any] | None] = {}
    for obj in revision.manifests:
        meta = obj.get("metadata") or {}
        live[object_key(obj)] = kube.get_object(
            conn, obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]
        )
    differences = manifest_differences(list(revision.manifests), live)
    topology_drift_record(topology=topology, differences=[dict(d) for d in differences])
    return differences


def drift_check_all() -> int:
    """Check every deployed topology; a cluster that cannot be reached is skipped. Returns drifted count."""
    import kube
    from topologies.models import Topology as TopologyModel

    drifted = 0
    queryset = TopologyModel.objects.filter(deployed_revision__isnull=False).select_related(
        "cluster", "deployed_revision"
    )
    for topology in queryset:
        try:
            if topology_drift_check(topology=topology):
                drifted += 1
        except kube.KubeError as error:
            logger.warning("drift check of topology %s skipped: %s", topology.pk, error)
    return drifted


@transaction.atomic
def deployment_orphan_fail(*, deployment: Deployment, attempts: int) -> None:
    """Give up on a job whose workers kept dying."""
    updated = Deployment.objects.filter(pk=deployment.pk, state__in=ACTIVE_STATES).update(
        state=State.FAILED,
        finished=timezone.now(),
        error=f"the deploy worker was lost {attempts} times; giving up",
    )
    if updated:
        fresh = Deployment.objects.get(pk=deployment.pk)
        deployment_step_add(
            deployment=fresh,
            message=f"Failed: the deploy worker was lost {attempts} times; check the workers and retry",
        )


@transaction.atomic
def deploy_policy_set(
    *,
    topology: Topology,
    ready_timeout_seconds: int | None,
    auto_rollback: bool | None,
    actor: Any,
    source_ip: str | None,
    keep_failed_first_deploy: bool | None = None,
) -> DeployPolicy:
    """Set the topology's ready timeout and automatic rollback (None: use the environment's default)."""
    if ready_timeout_seconds is not None and not 10 <= ready_timeout_seconds <= 24 * 3600:
        raise DomainError(
            "ready timeout out of range",
            fields={"ready_timeout_seconds": ["use 10 to 86400 seconds, or leave empty for the default"]},
        )
    defaults: dict[str, Any] = {
        "ready_timeout_seconds": ready_timeout_seconds,
        "auto_rollback": auto_rollback,
    }
    if keep_failed_first_deploy is not None:  # None: leave it as it is
        defaults["keep_failed_first_deploy"] = keep_failed_first_deploy
    policy, _ = DeployPolicy.objects.update_or_create(topology=topology, defaults=defaults)
    audit_record(
        action="topology.deploy_policy",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={**defaults, "keep_failed_first_deploy": policy.keep_failed_first_deploy},
    )
    return policy
