"""Writes around "one owner of the replica counts": the check before auto mode starts, the check on every
tick (which pauses auto mode when another owner shows up), and handing the ratio bounds to Kthena's
autoscaler. The decisions themselves are ``rebalancing.owners`` (pure); the reads are
``kube.replica_owners``."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

import kube
from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from controlplane.broadcast import broadcast_on_commit, topology_group
from rebalancing import owners, selectors
from rebalancing.models import Decision, Outcome, PlannerConfig, PlannerMode


def workload_keys(topology: Any) -> list[owners.Workload]:
    """The objects that carry the topology's role replicas, as its backend renders them (not yet read)."""
    roles = ("decode",) if topology.kv_connector == "none" else ("prefill", "decode")
    name, ns = str((topology.spec or {}).get("name") or topology.name), topology.namespace
    if topology.backend == "kthena":
        return [owners.Workload(owners.KTHENA_API, "ModelServing", ns, name, roles)]
    return [owners.Workload("apps/v1", "Deployment", ns, f"{name}-{role}", (role,)) for role in roles]


def owners_read(topology: Any) -> tuple[list[owners.Workload], list[dict[str, Any]], list[str]]:
    """The live workloads, the namespace's autoscalers and the autoscaler kinds Tandem may not list."""
    from clusters.selectors import cluster_connection

    keys = workload_keys(topology)
    readout = kube.replica_owners(
        cluster_connection(topology.cluster),
        topology.namespace,
        [(w.api_version, w.kind, w.name) for w in keys],
    )
    live = [
        owners.Workload(
            w.api_version,
            w.kind,
            w.namespace,
            w.name,
            w.roles,
            readout.workloads.get((w.api_version, w.kind, w.name)),
        )
        for w in keys
    ]
    return live, readout.autoscalers, readout.forbidden


def owners_start_check(
    *, topology: Any, actor: Any, source_ip: str | None
) -> tuple[owners.OwnerCheck, dict[str, Any]]:
    """Before auto mode starts: (what was found, the replica fields now). Another controller of the replicas
    refuses the start (Conflict naming it and what to do; audited)."""
    try:
        workloads, autoscalers, forbidden = owners_read(topology)
    except kube.KubeError as error:
        raise Conflict(
            f"auto mode not started: Tandem cannot check who else sets the replicas ({error.message}); "
            "try again when the cluster answers, or use advisory mode",
            code="owners_unchecked",
        ) from None
    check = owners.check_start(workloads, autoscalers)
    if forbidden:
        raise Conflict(
            "auto mode not started: Tandem may not list "
            + ", ".join(forbidden)
            + " in the namespace, so it cannot tell whether another autoscaler owns the replicas; grant "
            "list on them (see the cluster page's permissions) or use advisory mode",
            code="owners_unchecked",
        )
    if check.blocking:
        # the panel shows them with what to do (and the Kthena hand-over) after the refusal
        PlannerConfig.objects.update_or_create(topology=topology, defaults={"other_owners": check.as_list()})
        audit_record(
            action="topology.planner_refused",
            actor=actor,
            target=topology,
            source_ip=source_ip,
            detail={"reason": check.reason, "other_owners": check.as_list()},
        )
        raise Conflict(f"auto mode not started: {check.reason}", code="other_owner")
    return check, owners.seen(workloads)


def owners_tick(*, config: PlannerConfig) -> str:
    """One tick's check: refresh what the panel shows; in auto mode, pause on another owner. Returns why auto
    may not act this tick ('' when it may)."""
    topology = config.topology
    try:
        workloads, autoscalers, _forbidden = owners_read(topology)
    except kube.KubeError as error:
        return f"Tandem could not check who else sets the replicas ({error.message})"
    check = owners.check_tick(workloads, autoscalers, config.replicas_seen or {})
    seen = owners.seen(workloads)
    base = PlannerConfig.objects.filter(pk=config.pk, mode=config.mode)
    if config.mode != PlannerMode.AUTO or config.paused_reason or not check.blocking:
        base.update(other_owners=check.as_list(), replicas_seen=seen)
        return config.paused_reason if config.mode == PlannerMode.AUTO else ""
    _pause(config, check, seen)
    return check.reason


@transaction.atomic
def _pause(config: PlannerConfig, check: owners.OwnerCheck, seen: dict[str, Any]) -> None:
    """Pause auto mode: the reason on the planner, one decision in the timeline, an audit event. An operator
    who changed the mode meanwhile keeps their change."""
    topology = config.topology
    paused = PlannerConfig.objects.filter(pk=config.pk, mode=PlannerMode.AUTO, paused_reason="").update(
        paused_reason=check.reason, paused_at=timezone.now(), other_owners=check.as_list(), replicas_seen=seen
    )
    if not paused:
        return
    prefill, decode = selectors.effective_replicas(topology)
    names = ", ".join(o.name for o in check.blocking)
    decision = Decision.objects.create(
        topology=topology,
        mode=PlannerMode.AUTO,
        rule="other_owner",
        action="pause",
        from_prefill=prefill,
        from_decode=decode,
        to_prefill=prefill,
        to_decode=decode,
        explanation=f"auto paused: {check.reason}",
        inputs={"other_owners": check.as_list()},
        outcome=Outcome.PAUSED,
        outcome_detail=f"another owner of the replicas: {names}",
    )
    audit_record(
        action="topology.planner_paused",
        target=topology,
        actor_label="planner",
        detail={"decision": decision.pk, "reason": check.reason, "other_owners": check.as_list()},
    )
    broadcast_on_commit(
        topology_group(topology.pk),
        {
            "kind": "decision",
            "topology": topology.pk,
            "id": decision.pk,
            "rule": "other_owner",
            "action": "pause",
            "outcome": Outcome.PAUSED,
            "text": decision.explanation,
        },
    )


def _quantity(value: float) -> str:
    return f"{value:g}"


def planner_handoff(*, topology: Any, policy: str, actor: Any, source_ip: str | None) -> PlannerConfig:
    """Hand Tandem's P:D bounds to a Kthena AutoscalingPolicy that scales the roles: write them as its
    ``disaggregatedTarget.ratioConstraint`` (prefill over decode) and keep Tandem advisory, so Kthena alone
    sets the counts. Audited."""
    from clusters.selectors import cluster_connection

    config = selectors.planner_config(topology)
    missing = {
        name: ["set it first: Kthena's ratioConstraint needs both bounds"]
        for name, value in (("min_ratio", config.min_ratio), ("max_ratio", config.max_ratio))
        if value is None
    }
    if missing:
        raise DomainError("the planner has no P:D bounds to hand over", fields=missing)
    try:
        workloads, autoscalers, _forbidden = owners_read(topology)
    except kube.KubeError as error:
        raise Conflict(f"the policy was not changed: {error.message}", code="handoff_failed") from None
    known = {o.handoff for o in owners.check_start(workloads, autoscalers).owners if o.handoff}
    if policy not in known:
        raise DomainError(
            f"no Kthena AutoscalingPolicy {policy!r} scaling both roles was found",
            fields={"policy": [f"use one of {sorted(known)}" if known else "no policy to hand over to"]},
        )
    assert config.min_ratio is not None and config.max_ratio is not None
    try:
        kube.ratio_constraint_set(
            cluster_connection(topology.cluster),
            topology.namespace,
            policy,
            numerator="prefill",
            denominator="decode",
            min_ratio=_quantity(config.min_ratio),
            max_ratio=_quantity(config.max_ratio),
        )
    except kube.KubeError as error:
        raise Conflict(f"the policy was not changed: {error.message}", code="handoff_failed") from None
    return _handed_off(config=config, policy=policy, actor=actor, source_ip=source_ip)


@transaction.atomic
def _handed_off(*, config: PlannerConfig, policy: str, actor: Any, source_ip: str | None) -> PlannerConfig:
    locked = PlannerConfig.objects.select_for_update().select_related("topology").get(pk=config.pk)
    locked.mode = PlannerMode.ADVISORY
    locked.paused_reason, locked.paused_at = "", None
    locked.save(update_fields=["mode", "paused_reason", "paused_at", "updated"])
    audit_record(
        action="topology.planner_handoff",
        actor=actor,
        target=locked.topology,
        source_ip=source_ip,
        detail={
            "policy": policy,
            "ratioConstraint": {
                "numeratorRole": "prefill",
                "denominatorRole": "decode",
                "minRatio": _quantity(locked.min_ratio or 0),
                "maxRatio": _quantity(locked.max_ratio or 0),
            },
            "mode": PlannerMode.ADVISORY,
        },
    )
    return locked
