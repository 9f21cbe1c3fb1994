"""Writes for rollbacks: return to an earlier revision, or keep the running one and drop a failed wish."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from controlplane.broadcast import broadcast_on_commit, topology_group
from deployments.models import ACTIVE_STATES, Deployment, Kind
from deployments.rollbacks import candidate_for, rollback_plan
from deployments.services import deployment_start

if TYPE_CHECKING:
    from topologies.models import Revision, Topology


def _fresh(topology: Topology) -> Topology:
    from topologies.models import Topology as TopologyModel

    return TopologyModel.objects.select_related("deployed_revision", "current_revision").get(pk=topology.pk)


def rollback_target(*, topology: Topology, number: int | None) -> Revision:
    """The revision a rollback goes to: the one named, else the newest known-good one (never a failed or
    never-deployed one by default)."""
    from topologies.selectors import revision_get

    if number is None:
        plan = rollback_plan(_fresh(topology))
        if plan.default is None:
            raise DomainError(
                "no earlier revision of this topology ever ran successfully, so there is no safe default",
                code="no_known_good",
                fields={"revision": ["name the revision to deploy and confirm it with allow_untested"]},
            )
        number = plan.default
    revision = revision_get(topology, number)
    if revision is None:
        raise DomainError(
            f"topology {topology.name} has no revision {number}",
            fields={"revision": ["pick one of its revisions"]},
        )
    return revision


@transaction.atomic
def topology_rollback_start(
    *,
    topology: Topology,
    to_revision: Revision,
    actor: Any,
    source_ip: str | None,
    allow_untested: bool = False,
) -> Deployment:
    """Deploy an earlier revision again. One that never ran successfully needs ``allow_untested``."""
    if to_revision.topology_id != topology.pk:
        raise DomainError(
            f"revision {to_revision.number} belongs to another topology",
            fields={"revision": ["pick a revision number of this topology"]},
        )
    from topologies.services import topology_desired_set

    fresh = _fresh(topology)
    running = fresh.deployed_revision.number if fresh.deployed_revision else None
    if running == to_revision.number:
        raise DomainError(
            f"revision {running} is already running",
            code="already_running",
            fields={
                "revision": ["pick another revision; to stop wanting a failed one, keep the running revision"]
            },
        )
    candidate = candidate_for(fresh, to_revision, rollback_plan(fresh))
    known_good = candidate.known_good
    if not known_good and not allow_untested:
        outcome = candidate.outcome
        raise DomainError(
            f"revision {to_revision.number} never ran successfully ({outcome}); confirm to deploy it anyway",
            code="untested_revision",
            fields={"allow_untested": [f"set it to true to deploy revision {to_revision.number} anyway"]},
        )
    deployment = deployment_start(
        topology=fresh,
        revision=to_revision,
        kind=Kind.ROLLBACK,
        actor=actor,
        source_ip=source_ip,
        params={"from_revision": running, **({"untested": True} if not known_good else {})},
    )
    topology_desired_set(topology=fresh, revision=to_revision)
    return deployment


@transaction.atomic
def topology_keep_running(*, topology: Topology, actor: Any, source_ip: str | None) -> Topology:
    """Make the running revision the desired one again (a failed revision stops being wanted). Nothing is
    deployed; the Overview stops counting the failed attempt as a problem."""
    from topologies.models import Topology as TopologyModel
    from topologies.services import topology_desired_set

    locked = TopologyModel.objects.select_for_update().get(pk=topology.pk)
    locked = _fresh(locked)
    running = locked.deployed_revision
    if running is None:
        raise Conflict(
            "nothing is running, so there is no running revision to keep",
            code="nothing_running",
            fields={"revision": ["deploy a revision first"]},
        )
    if Deployment.objects.filter(topology=locked, state__in=ACTIVE_STATES).exists():
        raise Conflict(
            "a deployment of this topology is under way; wait for it or cancel it", code="deployment_active"
        )
    dropped = locked.current_revision.number if locked.current_revision is not None else None
    if dropped == running.number:
        raise Conflict(
            f"revision {running.number} is already the desired revision",
            code="already_desired",
            fields={"revision": ["nothing to keep: desired and running agree"]},
        )
    kept = topology_desired_set(topology=locked, revision=running)
    audit_record(
        action="topology.keep_running",
        actor=actor,
        target=kept,
        source_ip=source_ip,
        detail={"kept": running.number, "dropped": dropped},
    )
    broadcast_on_commit(
        topology_group(kept.pk),
        {"kind": "rollout", "topology": kept.pk, "desired": running.number, "running": running.number},
    )
    return kept
