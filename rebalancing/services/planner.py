"""Writes: the planner's settings and its tick (observe, decide, record, and in auto mode act)."""

from __future__ import annotations

import time
from dataclasses import fields
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import audit_record
from controlplane.api.errors import DomainError
from controlplane.broadcast import broadcast_on_commit, topology_group
from rebalancing import policy, selectors, staging
from rebalancing.models import (
    Decision,
    Outcome,
    PlannerConfig,
    PlannerMode,
    Rebalance,
    RebalanceKind,
    RebalanceState,
)
from rebalancing.services.inplace import is_in_place, switches_of
from rebalancing.services.overrides import overrides_refresh
from rebalancing.services.owners import owners_start_check, owners_tick
from rebalancing.services.rebalances import rebalance_advance, rebalance_ratio_start
from rebalancing.services.staging import (
    STATE_KEY,
    SWEPT_KEY,
    stage_donors,
    stage_release,
    stage_release_left,
    staged_pods,
    sweep_due,
    unrouted_sweep,
)

PARAM_LIMITS: dict[str, tuple[float, float]] = {
    "interval_seconds": (1, 300),
    "breach_intervals": (1, 100),
    "cooldown_seconds": (0, 3600),
    "settle_intervals": (0, 100),
    "headroom": (0.1, 1.0),
    "flap_window_seconds": (0, 24 * 3600),
    "queue_per_instance": (0.5, 10000),
    "kv_usage_high": (0.1, 1.0),
    "idle_intervals": (1, 10000),
    "idle_headroom": (0.05, 1.0),
    "prefill_tokens_per_s": (0, 1e9),
    "decode_tokens_per_s": (0, 1e9),
    "drain_seconds": (1, 3600),
    "target_utilization": (0.1, 1.0),
    "donor_keeps": (1, 1000),
    "forecast_alpha": (0.01, 1.0),
    "forecast_horizon_seconds": (0, 3600),
    "forecast_warmup": (1, 1000),
    "forecast_intervals": (1, 100),
    "forecast_gain": (0, 10),
}
BOOL_PARAMS = ("release_idle", "demand_split", "stage_ahead", "forecast_split")
TICK_LEASE_SECONDS = 120  # longer than any tick's API calls; a crashed tick's planner ticks again after


# --- planner settings -------------------------------------------------------------------------------


def clean_params(raw: Any) -> dict[str, Any]:
    """Validated planner parameter overrides; DomainError naming the field and the fix."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise DomainError(
            "params must be an object", fields={"params": ['send an object, e.g. {"breach_intervals": 3}']}
        )
    known = {f.name: f for f in fields(policy.Params)}
    out: dict[str, Any] = {}
    problems: dict[str, list[str]] = {}
    for key, value in raw.items():
        if key not in known:
            problems[f"params.{key}"] = [f"unknown parameter; use one of {sorted(known)}"]
            continue
        if key in BOOL_PARAMS:
            if not isinstance(value, bool):
                problems[f"params.{key}"] = ["use true or false"]
            else:
                out[key] = value
            continue
        lo, hi = PARAM_LIMITS[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
            problems[f"params.{key}"] = [f"use a number from {lo:g} to {hi:g}"]
            continue
        out[key] = int(value) if known[key].type in ("int", int) else float(value)
    if problems:
        raise DomainError("invalid planner parameters", fields=problems)
    return out


def planner_config_set(
    *,
    topology: Any,
    mode: str,
    params: dict[str, Any] | None,
    min_ratio: float | None,
    max_ratio: float | None,
    actor: Any,
    source_ip: str | None,
) -> PlannerConfig:
    """Set the planner's mode (off / advisory / auto), parameters and ratio constraint. Auto mode starts (or
    resumes after a pause) only when nothing else owns the replica counts (``rebalancing.owners``): otherwise
    a Conflict names the other owner and what to do."""
    _settings_problem(mode, min_ratio, max_ratio)
    clean_params(params)
    current = selectors.planner_config(topology)
    start = None
    if mode == PlannerMode.AUTO and (current.mode != PlannerMode.AUTO or current.paused_reason):
        start = owners_start_check(topology=topology, actor=actor, source_ip=source_ip)
    return _config_save(
        topology=topology,
        mode=mode,
        params=params,
        min_ratio=min_ratio,
        max_ratio=max_ratio,
        actor=actor,
        source_ip=source_ip,
        start=start,
    )


def _settings_problem(mode: str, min_ratio: float | None, max_ratio: float | None) -> None:
    if mode not in PlannerMode.values:
        raise DomainError(
            f"unknown planner mode {mode!r}", fields={"mode": [f"use one of {PlannerMode.values}"]}
        )
    for name, value in (("min_ratio", min_ratio), ("max_ratio", max_ratio)):
        if value is not None and not 0 < value <= 100:
            raise DomainError(
                f"{name} out of range", fields={name: ["use a P:D ratio above 0 and at most 100"]}
            )
    if min_ratio is not None and max_ratio is not None and min_ratio > max_ratio:
        raise DomainError(
            "minRatio is above maxRatio", fields={"min_ratio": ["make min_ratio at most max_ratio"]}
        )


@transaction.atomic
def _config_save(
    *,
    topology: Any,
    mode: str,
    params: dict[str, Any] | None,
    min_ratio: float | None,
    max_ratio: float | None,
    actor: Any,
    source_ip: str | None,
    start: tuple[Any, dict[str, Any]] | None,
) -> PlannerConfig:
    cleaned = clean_params(params)
    config, _ = PlannerConfig.objects.select_for_update().get_or_create(topology=topology)
    if start is not None:  # auto starts or resumes: what the check found, and the replicas as they are now
        config.other_owners, config.replicas_seen = start[0].as_list(), start[1]
    if start is not None or mode != PlannerMode.AUTO:
        config.paused_reason, config.paused_at = "", None
    changed_mode = config.mode != mode
    config.mode = mode
    config.params = cleaned
    config.min_ratio = min_ratio
    config.max_ratio = max_ratio
    if changed_mode:
        # Pods that cannot be routed again now stay in the state: the next interval (or, with the planner
        # off, ``planner_release_left``) tries again.
        left = stage_release_left(topology=topology, staged=staged_pods(config.state))
        config.state = {STATE_KEY: left} if left else {}
    config.save()
    audit_record(
        action="topology.planner_set",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={"mode": mode, "params": cleaned, "min_ratio": min_ratio, "max_ratio": max_ratio},
    )
    return config


# --- the planner ----------------------------------------------------------------------------------


def planner_tick(*, config: PlannerConfig, now: float | None = None) -> Decision | None:
    """One planner interval for one topology: observe, decide, record, and (auto) act.

    No transaction or row lock is held while the engines and the Kubernetes API are called: the tick is
    claimed with a lease (``ticking_until``, a conditional update: a concurrent tick of the same planner
    finds it taken and does nothing; a crashed tick's lease runs out), and what it decided is written in
    one short transaction at the end (``_record``), which ends the lease. A decision is stored when its
    rule, action or target differs from the previous one (so a steady topology does not write a row
    every interval); every acting decision is stored."""
    locked = PlannerConfig.objects.select_related("topology").get(pk=config.pk)
    if locked.mode == PlannerMode.OFF:
        return None
    started = timezone.now()
    free = Q(ticking_until__isnull=True) | Q(ticking_until__lt=started)
    lease = started + timedelta(seconds=TICK_LEASE_SECONDS)
    if not PlannerConfig.objects.filter(free, pk=locked.pk).update(ticking_until=lease):
        return None  # another tick of this planner is under way
    try:
        return _tick(locked, now)
    except BaseException:
        PlannerConfig.objects.filter(pk=locked.pk).update(ticking_until=None)
        raise


def _tick(locked: PlannerConfig, now: float | None) -> Decision | None:
    topology = locked.topology
    now = time.time() if now is None else now
    overrides_refresh(topology=topology)
    params = selectors.planner_params(locked)
    limits = selectors.topology_limits(topology, locked)
    obs = selectors.observation(topology, now=now)
    state = policy.State.from_dict(locked.state)
    staged = staged_pods(locked.state)
    if staged and not state.staged_role:  # no staged move to follow (its state was reset): route them
        stage_release(topology=topology, staged=staged)
        staged = {}
    swept_at = (locked.state or {}).get(SWEPT_KEY)
    # Only pods the planner itself staged are swept (advisory mode stages none; after a change from auto
    # the sweep routes what the change could not).
    if obs.in_place and not obs.busy and sweep_due(locked.state, now):
        unrouted_sweep(topology=topology, staged=staged)
        swept_at = now
    verdict, state = policy.decide(obs, params, limits, state)
    outcome: str = Outcome.HELD
    detail, rebalance = "", None
    held = owners_tick(config=locked)  # another owner of the replicas: auto pauses (acts as advisory)
    if (verdict.acts or verdict.prepares) and locked.mode == PlannerMode.ADVISORY:
        outcome, detail = Outcome.ADVISED, "advisory mode: recorded, not acted on"
    elif (verdict.acts or verdict.prepares) and held:
        outcome, detail = Outcome.ADVISED, f"auto paused, not acted on: {held}"
    elif verdict.prepares:
        outcome, detail, staged, state = _prepare(topology, verdict, staged, state)
    elif verdict.acts:
        try:
            rebalance = rebalance_ratio_start(
                topology=topology,
                prefill=verdict.prefill,
                decode=verdict.decode,
                actor=None,
                source_ip=None,
                kind=RebalanceKind.PLANNER,
                staged=staged or None,
            )
            outcome, detail = Outcome.STARTED, f"rebalance #{rebalance.pk} started"
            state = policy.after_move(state, verdict, now, state.last_move_seconds)
            taken = {s["instance"] for s in switches_of(rebalance)} if is_in_place(rebalance) else set()
            stage_release(topology=topology, staged={k: v for k, v in staged.items() if k not in taken})
        except DomainError as error:
            outcome, detail = Outcome.REFUSED, error.message
            stage_release(topology=topology, staged=staged)
        staged = {}
    new_state = {
        **state.as_dict(),
        **({STATE_KEY: staged} if staged else {}),
        **({SWEPT_KEY: swept_at} if swept_at is not None else {}),
    }
    return _record(locked, new_state, obs, params, verdict, state, outcome, detail, rebalance, now)


@transaction.atomic
def _record(
    read: PlannerConfig,
    new_state: dict[str, Any],
    obs: Any,
    params: Any,
    verdict: policy.Verdict,
    state: policy.State,
    outcome: str,
    detail: str,
    rebalance: Rebalance | None,
    now: float,
) -> Decision | None:
    """What one tick decided, in one short transaction. An operator who changed the planner while the
    tick ran (its mode or state moved) keeps their change: the tick's state is not written over it."""
    locked = PlannerConfig.objects.select_for_update().select_related("topology").get(pk=read.pk)
    topology = locked.topology
    changed = ["last_tick", "ticking_until"]
    if locked.mode == read.mode and locked.state == read.state:
        locked.state = new_state
        changed.append("state")
    locked.last_tick, locked.ticking_until = timezone.now(), None
    locked.save(update_fields=changed)
    previous = Decision.objects.filter(topology=topology).first()
    same = (
        previous is not None
        and previous.rule == verdict.rule
        and previous.action == verdict.action
        and (previous.to_prefill, previous.to_decode) == (verdict.prefill, verdict.decode)
        and previous.outcome in (Outcome.HELD, Outcome.ADVISED)
        and outcome in (Outcome.HELD, Outcome.ADVISED)
        and previous.mode == locked.mode
    )
    if same and verdict.rule not in ("breach_pending",) and outcome == Outcome.HELD:
        return None
    if same and outcome == Outcome.ADVISED and now - previous.created.timestamp() < 60:  # type: ignore[union-attr]
        return None
    decision = Decision.objects.create(
        topology=topology,
        mode=locked.mode,
        rule=verdict.rule,
        action=verdict.action,
        from_prefill=obs.prefill,
        from_decode=obs.decode,
        to_prefill=verdict.prefill,
        to_decode=verdict.decode,
        explanation=verdict.explanation,
        inputs={"observation": obs.as_dict(), "params": params.__dict__, "state": state.as_dict()},
        outcome=outcome,
        outcome_detail=detail,
        rebalance=rebalance,
    )
    if verdict.acts or verdict.prepares or verdict.rule in ("links_unhealthy", "both_breached"):
        prefix = "advice" if outcome == Outcome.ADVISED else "planner"
        audit_record(
            action="rebalancing.decision",
            target=topology,
            actor_label="planner",
            detail={
                "decision": decision.pk,
                "rule": verdict.rule,
                "action": verdict.action,
                "outcome": outcome,
                "text": f"{prefix}: {verdict.explanation}",
            },
        )
    broadcast_on_commit(
        topology_group(topology.pk),
        {
            "kind": "decision",
            "topology": topology.pk,
            "id": decision.pk,
            "rule": verdict.rule,
            "action": verdict.action,
            "outcome": outcome,
            "text": verdict.explanation,
        },
    )
    return decision


def _prepare(
    topology: Any, verdict: policy.Verdict, staged: dict[str, str], state: policy.State
) -> tuple[str, str, dict[str, str], policy.State]:
    """Carry out a staging verdict: (outcome, detail, the pods staged now, the state)."""
    if verdict.action == "unstage":
        routed = stage_release(topology=topology, staged=staged)
        return Outcome.HELD, f"routed again: {', '.join(routed)}" if routed else "", {}, state
    try:
        now = stage_donors(topology=topology, target=(verdict.prefill, verdict.decode), staged=staged)
    except DomainError as error:
        stage_release(topology=topology, staged=staged)
        return Outcome.REFUSED, error.message, {}, staging.cleared(state)
    new = ", ".join(name for name in now if name not in staged)
    return Outcome.STARTED, f"out of routing ahead of the move: {new}", now, state


@transaction.atomic
def planner_release_left(*, config: PlannerConfig) -> dict[str, str]:
    """With the planner off, route the staged pods its last mode change could not; returns those still
    left (kept in its state for the next try)."""
    locked = PlannerConfig.objects.select_for_update().select_related("topology").get(pk=config.pk)
    staged = staged_pods(locked.state)
    if locked.mode != PlannerMode.OFF or not staged:
        return {}
    left = stage_release_left(topology=locked.topology, staged=staged)
    locked.state = {STATE_KEY: left} if left else {}
    locked.save(update_fields=["state"])
    return left


def planner_tick_all(*, now: float | None = None) -> int:
    """Tick every planner that is on, move on every running rebalance, and keep the role overrides of
    topologies without a planner true to their pods; returns decisions stored."""
    stored = 0
    for rebalance in Rebalance.objects.filter(state=RebalanceState.RUNNING):
        rebalance_advance(rebalance=rebalance)
    moment = time.time() if now is None else now
    for config in selectors.planners_to_tick():
        interval = selectors.planner_params(config).interval_seconds
        if config.last_tick is not None and moment - config.last_tick.timestamp() < interval - 0.5:
            continue
        if planner_tick(config=config, now=now) is not None:
            stored += 1
    for config in selectors.planners_off_with_staged_pods():
        planner_release_left(config=config)
    for topology in selectors.unplanned_topologies_with_overrides():
        overrides_refresh(topology=topology)
    return stored
