"""Writes: ratio changes and restart-based role switches, run as deployments scale jobs one move at a time,
and the start of in-place role switches (carried out by ``rebalancing.services.inplace``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from rebalancing import policy, selectors
from rebalancing.models import (
    Rebalance,
    RebalanceKind,
)
from rebalancing.moves import plan_moves, target_problems
from rebalancing.services.inplace import in_place_is_orphaned, is_in_place
from rebalancing.services.inplace_start import ratio_in_place_start, switch_in_place_start
from rebalancing.services.overrides import overrides_refresh
from rebalancing.services.steps import create
from rebalancing.services.steps import finish as _finish
from rebalancing.services.steps import log_step as _log
from rebalancing.switching import in_place_problem, role_pods, serving_roles, switch_path, victim_problem

# --- ratio changes and role switches --------------------------------------------------------------


def _refresh_overrides(topology: Any) -> None:
    """A replaced pod serves its template's role again: drop overrides that no longer hold."""
    overrides_refresh(topology=topology)


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


@transaction.atomic
def rebalance_ratio_start(
    *,
    topology: Any,
    prefill: int,
    decode: int,
    actor: Any,
    source_ip: str | None,
    kind: str = RebalanceKind.RATIO,
    staged: dict[str, str] | None = None,
) -> Rebalance:
    """Plan the moves from the current split to prefill/decode and start the first one. ``staged``: pods
    the planner took out of routing ahead of this move (``rebalancing.services.staging``)."""
    from topologies.models import Topology

    locked = Topology.objects.select_for_update().get(pk=topology.pk)
    _refresh_overrides(locked)
    current = selectors.effective_replicas(locked)
    limits = selectors.topology_limits(locked)
    problems = {
        role: [f"rebalancing.{role} is not set; set its min and max in the topology's editor first"]
        for role in selectors.unset_bounds(locked)
    } or target_problems(*current, prefill, decode, limits)
    if problems:
        messages = next(iter(problems.values()))
        raise DomainError(
            f"cannot set {prefill}P/{decode}D: {messages[0]}", code="ratio_refused", fields=problems
        )
    _refuse_busy(locked)
    if kind != RebalanceKind.PLANNER:
        _refuse_unhealthy_links(locked)
    path = switch_path(locked.engine, locked.kv_connector, locked.backend)
    scale_why = ""
    if path.name == "in_place" and sum(current) == prefill + decode:
        listed = role_pods(locked)
        scale_why = in_place_problem(listed)
        if not scale_why:
            return ratio_in_place_start(
                topology=locked,
                current=current,
                target=(prefill, decode),
                kind=kind,
                path_reason=path.reason,
                actor=actor,
                source_ip=source_ip,
                pods=listed,
                staged=staged,
            )
    # In-place switches moved instances between roles without the orchestrator knowing: the scale
    # jobs work on the spec's replicas, which are the target less what the switches moved.
    dp, dd = selectors.override_delta(locked)
    spec_current, spec_target = selectors.role_replicas(locked.spec), (prefill - dp, decode - dd)
    if min(spec_target) < 1:
        why = "in-place switches moved instances between roles; switch them back before scaling to this split"
        raise DomainError(
            f"cannot set {prefill}P/{decode}D: {why}", code="ratio_refused", fields={"prefill": [why]}
        )
    moves = [m.as_dict() for m in plan_moves(*spec_current, *spec_target, limits)]
    rebalance = create(topology=locked, kind=kind, target=(prefill, decode), moves=moves, actor=actor)
    plan_text = ", then ".join(f"{m['role']} → {m['replicas']}" for m in moves)
    _log(
        rebalance,
        f"Planned {current[0]}P/{current[1]}D → {prefill}P/{decode}D as {len(moves)} moves: {plan_text}"
        + (f" (not in place: {scale_why})" if scale_why else ""),
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
    *,
    topology: Any,
    instance: str,
    target_role: str,
    actor: Any,
    source_ip: str | None,
    drain_timeout_seconds: float | None = None,
) -> Rebalance:
    """Switch one running instance to the other role.

    Engines with an in-place switch (MindIE on Kthena, see ``switching``) get it, run by a worker
    (``rebalance_in_place_run``); the others (vLLM, whose kv_role is fixed at start-up) get the
    restart-based path: one instance of the target role is added and Ready before the named instance
    is drained and removed."""
    from topologies.models import Topology

    if target_role not in ("prefill", "decode"):
        raise DomainError(f"unknown role {target_role!r}", fields={"target_role": ["use prefill or decode"]})
    locked = Topology.objects.select_for_update().get(pk=topology.pk)
    source_role = "decode" if target_role == "prefill" else "prefill"
    _refresh_overrides(locked)
    prefill, decode = selectors.effective_replicas(locked)
    limits = selectors.topology_limits(locked)
    _refuse_busy(locked)
    _refuse_unhealthy_links(locked)
    listed = role_pods(locked)
    pods = {name: serving for name, (serving, _) in serving_roles(listed).items()}
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
    path = switch_path(locked.engine, locked.kv_connector, locked.backend)
    if path.name == "in_place":
        unroutable = in_place_problem(listed)
        if unroutable:
            raise Conflict(
                f"cannot switch {instance} in place: {unroutable}",
                code="redeploy_needed",
                fields={"instance": [unroutable]},
            )
        return switch_in_place_start(
            topology=locked,
            instance=instance,
            source_role=source_role,
            target_role=target_role,
            target=target,
            path_reason=path.reason,
            drain_timeout_seconds=drain_timeout_seconds,
            actor=actor,
            source_ip=source_ip,
        )
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
    victim = victim_problem(locked, instance, source_role, listed)
    if victim:
        raise DomainError(victim, code="instance_not_removable", fields={"instance": [victim]})
    moves = [
        {"role": target_role, "replicas": grown[0] if target_role == "prefill" else grown[1]},
        {"role": source_role, "replicas": target[0] if source_role == "prefill" else target[1]},
    ]
    rebalance = create(
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
    if is_in_place(locked):
        # A worker carries it out (rebalance_in_place_run); re-enqueue it if that worker was lost.
        from rebalancing.tasks import run_in_place_switch

        if in_place_is_orphaned(locked):
            run_in_place_switch.apply_async_on_commit((locked.pk,))
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
        f"({deployment.describe()}){extra}",
    )
    from rebalancing.tasks import advance_rebalance

    advance_rebalance.apply_async_on_commit((locked.pk,), countdown=1)
    return locked
