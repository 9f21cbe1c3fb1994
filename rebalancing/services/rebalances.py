"""Writes: ratio changes and restart-based role switches, run as deployments scale jobs one move at a time."""

from __future__ import annotations

import time
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from controlplane.broadcast import broadcast_on_commit, topology_group
from rebalancing import policy, selectors
from rebalancing.models import (
    Outcome,
    PlannerConfig,
    Rebalance,
    RebalanceKind,
    RebalanceState,
)
from rebalancing.moves import plan_moves, target_problems
from rebalancing.switching import switch_path, victim_problem


def _actor_label(actor: Any) -> str:
    if actor is not None and getattr(actor, "is_authenticated", False):
        return str(actor.get_username())
    return "planner"


def _event(rebalance: Rebalance, message: str) -> None:
    broadcast_on_commit(
        topology_group(rebalance.topology_id),
        {
            "kind": "rebalance",
            "id": rebalance.pk,
            "topology": rebalance.topology_id,
            "state": rebalance.state,
            "target": {"prefill": rebalance.target_prefill, "decode": rebalance.target_decode},
            "message": message,
        },
    )


def _log(rebalance: Rebalance, message: str) -> None:
    rebalance.log = [*rebalance.log, {"ts": time.time(), "message": message}]
    rebalance.save(update_fields=["log"])
    _event(rebalance, message)


# --- ratio changes and role switches --------------------------------------------------------------


def _refuse_busy(topology: Any) -> None:
    busy = selectors.busy_reason(topology)
    if busy:
        raise Conflict(
            f"cannot rebalance now: {busy}",
            code="rebalance_busy",
            fields={"topology": [f"{busy}; wait for it to finish (or cancel it) and try again"]},
        )


def _refuse_unhealthy_links(topology: Any) -> None:
    obs = selectors.observation(topology)
    if obs.links_down:
        raise Conflict(
            f"KV links are down ({', '.join(obs.links_down[:3])}); fix the links before rebalancing",
            code="links_unhealthy",
            fields={"topology": ["a broken link is a link problem, not a ratio problem: repair it first"]},
        )


def _create(
    *,
    topology: Any,
    kind: str,
    target: tuple[int, int],
    moves: list[dict[str, Any]],
    actor: Any,
    params: dict[str, Any] | None = None,
) -> Rebalance:
    prefill, decode = selectors.role_replicas(topology.spec)
    try:
        with transaction.atomic():
            rebalance = Rebalance.objects.create(
                topology=topology,
                kind=kind,
                from_prefill=prefill,
                from_decode=decode,
                target_prefill=target[0],
                target_decode=target[1],
                moves=moves,
                params=params or {},
                requested_by_label=_actor_label(actor),
            )
    except IntegrityError:
        raise Conflict(
            "another rebalance of this topology started at the same moment", code="rebalance_busy"
        ) from None
    return rebalance


@transaction.atomic
def rebalance_ratio_start(
    *,
    topology: Any,
    prefill: int,
    decode: int,
    actor: Any,
    source_ip: str | None,
    kind: str = RebalanceKind.RATIO,
) -> Rebalance:
    """Plan the moves from the current split to prefill/decode and start the first one."""
    from topologies.models import Topology

    locked = Topology.objects.select_for_update().get(pk=topology.pk)
    current = selectors.role_replicas(locked.spec)
    limits = selectors.topology_limits(locked)
    problems = target_problems(*current, prefill, decode, limits)
    if problems:
        messages = next(iter(problems.values()))
        raise DomainError(
            f"cannot set {prefill}P/{decode}D: {messages[0]}", code="ratio_refused", fields=problems
        )
    _refuse_busy(locked)
    if kind != RebalanceKind.PLANNER:
        _refuse_unhealthy_links(locked)
    moves = [m.as_dict() for m in plan_moves(*current, prefill, decode, limits)]
    rebalance = _create(topology=locked, kind=kind, target=(prefill, decode), moves=moves, actor=actor)
    plan_text = ", then ".join(f"{m['role']} → {m['replicas']}" for m in moves)
    _log(
        rebalance,
        f"Planned {current[0]}P/{current[1]}D → {prefill}P/{decode}D as {len(moves)} moves: {plan_text}",
    )
    audit_record(
        action="rebalancing.ratio_start",
        actor=actor,
        target=locked,
        source_ip=source_ip,
        detail={
            "rebalance": rebalance.pk,
            "prefill": prefill,
            "decode": decode,
            "moves": moves,
            "text": f"rebalance to {prefill}P/{decode}D started by {rebalance.requested_by_label}",
        },
    )
    return rebalance_advance(rebalance=rebalance)


@transaction.atomic
def rebalance_switch_start(
    *, topology: Any, instance: str, target_role: str, actor: Any, source_ip: str | None
) -> Rebalance:
    """Switch one running instance to the other role.

    Engines with an in-place switch get it; the others (vLLM, whose kv_role is fixed at start-up) get
    the restart-based path: one instance of the target role is added and Ready before the named
    instance is drained and removed."""
    from topologies.models import Topology

    if target_role not in ("prefill", "decode"):
        raise DomainError(f"unknown role {target_role!r}", fields={"target_role": ["use prefill or decode"]})
    locked = Topology.objects.select_for_update().get(pk=topology.pk)
    source_role = "decode" if target_role == "prefill" else "prefill"
    prefill, decode = selectors.role_replicas(locked.spec)
    limits = selectors.topology_limits(locked)
    _refuse_busy(locked)
    _refuse_unhealthy_links(locked)
    pods = _pods_by_role(locked)
    if instance not in pods:
        raise DomainError(
            f"{instance} is not a running instance of {locked.name}",
            code="unknown_instance",
            fields={"instance": [f"use one of {sorted(pods)}"]},
        )
    if pods[instance] != source_role:
        raise DomainError(
            f"{instance} already serves {pods[instance]}",
            code="already_that_role",
            fields={
                "target_role": [
                    f"{instance} is a {pods[instance]} instance; switch it to {source_role} or pick another"
                ]
            },
        )
    target = (prefill + 1, decode - 1) if target_role == "prefill" else (prefill - 1, decode + 1)
    lo, _ = limits.bounds(source_role)
    if (target[1] if source_role == "decode" else target[0]) < max(1, lo):
        raise DomainError(
            f"switching {instance} would leave {source_role} below its minimum of {max(1, lo)}",
            code="below_minimum",
            fields={
                "instance": [
                    f"raise rebalancing.{source_role}.min's headroom first: add a {source_role} instance"
                ]
            },
        )
    problem = policy.split_problem(limits, *target)
    if problem:
        raise DomainError(
            f"cannot switch {instance}: {problem}", code="switch_refused", fields={"target_role": [problem]}
        )
    path = switch_path(locked.engine, locked.kv_connector)
    grown = (prefill + 1, decode) if target_role == "prefill" else (prefill, decode + 1)
    if limits.cost(*grown) > limits.budget:
        raise DomainError(
            f"no room in the budget of {limits.budget} accelerators for the new {target_role} instance "
            f"({path.reason}); the restart-based switch needs it Ready before {instance} is removed",
            code="budget_full",
            fields={
                "instance": [
                    "use set-the-ratio (it removes first at a full budget) or raise the accelerator budget"
                ]
            },
        )
    victim = victim_problem(locked, instance, source_role, pods)
    if victim:
        raise DomainError(victim, code="instance_not_removable", fields={"instance": [victim]})
    moves = [
        {"role": target_role, "replicas": grown[0] if target_role == "prefill" else grown[1]},
        {"role": source_role, "replicas": target[0] if source_role == "prefill" else target[1]},
    ]
    rebalance = _create(
        topology=locked,
        kind=RebalanceKind.SWITCH_RESTART,
        target=target,
        moves=moves,
        actor=actor,
        params={"instance": instance, "target_role": target_role, "path": path.name, "why": path.reason},
    )
    _log(
        rebalance,
        f"Switch {instance} → {target_role}, restart-based ({path.reason}): add one {target_role}, "
        "wait until "
        f"it is Ready, then drain and remove {instance}",
    )
    audit_record(
        action="rebalancing.switch_role",
        actor=actor,
        target=locked,
        source_ip=source_ip,
        detail={
            "rebalance": rebalance.pk,
            "instance": instance,
            "target_role": target_role,
            "path": path.name,
            "text": f"{instance} → {target_role} (restart-based) by {rebalance.requested_by_label}",
        },
    )
    return rebalance_advance(rebalance=rebalance)


def _pods_by_role(topology: Any) -> dict[str, str]:
    import kube
    from clusters.selectors import cluster_connection
    from kube.labels import ROLE, topology_selector

    try:
        pods = kube.list_pods(
            cluster_connection(topology.cluster), topology.namespace, topology_selector(topology.pk)
        )
    except kube.KubeError as error:
        raise Conflict(
            f"the cluster cannot be asked for the topology's pods: {error}", code="cluster_unreachable"
        ) from None
    return {
        p.name: p.labels.get(ROLE, "")
        for p in pods
        if not p.deletion_pending and p.labels.get(ROLE) in ("prefill", "decode")
    }


@transaction.atomic
def rebalance_advance(*, rebalance: Rebalance) -> Rebalance:
    """Move a rebalance on: wait for its current scale job, start the next move, or finish. Idempotent."""
    from deployments.models import ACTIVE_STATES, Deployment, State
    from deployments.services import topology_scale_start

    locked = (
        Rebalance.objects.select_for_update(of=("self",))
        .select_related("topology", "deployment")
        .get(pk=rebalance.pk)
    )
    if not locked.is_active:
        return locked
    current = locked.deployment
    if current is not None:
        current = Deployment.objects.get(pk=current.pk)
        if current.state in ACTIVE_STATES:
            return locked
        if current.state != State.SUCCEEDED:
            return _finish(
                locked,
                ok=False,
                message=f"move {locked.next_move} ({current.describe()}) "
                f"{current.get_state_display().lower()}: {current.error or 'see the deployment'}",
            )
        _log(locked, f"Move {locked.next_move}/{len(locked.moves)} done: {current.describe()} is Ready")
        locked.deployment = None
        locked.save(update_fields=["deployment"])
    if locked.next_move >= len(locked.moves):
        return _finish(locked, ok=True, message=f"Reached {locked.target_prefill}P/{locked.target_decode}D")
    move = locked.moves[locked.next_move]
    topology = locked.topology
    try:
        deployment = topology_scale_start(
            topology=topology, role=move["role"], replicas=int(move["replicas"]), actor=None, source_ip=None
        )
    except DomainError as error:
        return _finish(
            locked, ok=False, message=f"move {locked.next_move + 1} could not start: {error.message}"
        )
    locked.deployment = deployment
    locked.deployments = [*locked.deployments, deployment.pk]
    locked.next_move += 1
    locked.save(update_fields=["deployment", "deployments", "next_move"])
    extra = ""
    if locked.kind == RebalanceKind.SWITCH_RESTART and move["role"] != locked.params.get("target_role"):
        name = locked.params.get("instance")
        extra = f": {name} stops taking requests, drains its in-flight ones, and is removed"
    _log(
        locked,
        f"Move {locked.next_move}/{len(locked.moves)}: scale {move['role']} to {move['replicas']} "
        f"(deployment #{deployment.pk}){extra}",
    )
    from rebalancing.tasks import advance_rebalance

    advance_rebalance.apply_async_on_commit((locked.pk,), countdown=1)
    return locked


def _finish(rebalance: Rebalance, *, ok: bool, message: str) -> Rebalance:
    rebalance.state = RebalanceState.SUCCEEDED if ok else RebalanceState.FAILED
    rebalance.finished = timezone.now()
    rebalance.error = "" if ok else message
    rebalance.save(update_fields=["state", "finished", "error"])
    _log(rebalance, message)
    seconds = (rebalance.finished - rebalance.created).total_seconds()
    for decision in rebalance.decisions.all():
        decision.outcome = Outcome.SUCCEEDED if ok else Outcome.FAILED
        decision.outcome_detail = f"{message} in {seconds:.0f} s"
        decision.save(update_fields=["outcome", "outcome_detail"])
    config = PlannerConfig.objects.filter(topology=rebalance.topology).first()
    if config is not None and rebalance.kind == RebalanceKind.PLANNER:
        state = dict(config.state or {})
        state["last_move_seconds"] = seconds
        config.state = state
        config.save(update_fields=["state"])
    audit_record(
        action="rebalancing.finished",
        target=rebalance.topology,
        detail={
            "rebalance": rebalance.pk,
            "ok": ok,
            "text": f"rebalance {'done' if ok else 'failed'}: {message}",
        },
    )
    return rebalance
