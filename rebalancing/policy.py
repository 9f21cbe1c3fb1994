"""The planner's policy (PURE: no database, no clock, no network).

One call per interval: ``decide(observation, params, state)`` returns a ``Verdict`` (the rule that
fired, the action, the target split and a sentence explaining it) and the planner's new ``State``
(breach streaks, the last move). The same function drives the live planner, the what-if and the
benchmark.

Rules, in order (the first that applies wins):

1. ``no_data``: no fresh telemetry, or no request finished: nothing to judge.
2. ``links_unhealthy``: a KV link is down. A broken link is a link problem, not a ratio problem:
   moving capacity would not help, so the planner holds and says which link.
3. ``busy``: a deploy or another move is in progress.
4. ``cooldown``: the last move is younger than its cooldown (the configured cooldown, or the time the
   move itself took plus settling intervals, whichever is longer: a restart-based move costs a model
   load).
5. ``ttft_breach`` / ``tbt_breach``: the role's SLO (TTFT p95 for prefill, TBT p95 for decode, or a
   queue/KV-usage pressure signal) has been breached for ``breach_intervals`` intervals in a row. Below
   the budget and the role's maximum: add one instance of that role. At the budget: an opposing move
   (one instance of the other role becomes this role) only if the other role's remaining instances
   would still meet its SLO with ``headroom`` to spare (its load spread over one instance fewer), its
   measured demand would still fit on them within ``headroom`` (with ``demand_split``, once its capacity
   is measured or configured: a decode at its batch limit keeps its TBT) and the split stays within the
   bounds and the ratio constraint. Reversing the previous move within
   ``flap_window_seconds`` needs twice the streak (hysteresis: no flapping).
   ``demand_split`` (with ``demand_split``, the default) comes first at the budget, once the same
   sustained breach holds: with both roles' per-instance capacities known (configured, or learned from
   the telemetry by ``rebalancing.demand``) it moves as many instances as the measured demand needs to
   bring both roles to at most ``headroom`` utilization (the nearest such split), but only as far as
   the donor's remaining instances would still run at most at ``headroom`` and hold no queue. Its
   explanation gives the demand, the capacities and both utilizations. Without a prediction, or when
   the balance does not favour the breached role, the one-instance rule above decides.
   ``backlog_draining`` (also with ``demand_split``): the breached role's queue shrank since the last
   interval fast enough to be empty within ``drain_seconds``: the breach is the backlog of a shift the
   current split already meets, so the planner holds instead of moving again.
6. ``both_breached``: both roles breach: at the budget nothing can be moved without hurting the
   other; below it the more breached role grows.
7. ``forecast_split`` (with ``forecast_split``, the default): no breach has held, but the demand
   forecast says the split will not serve it. Every free interval (in cooldown too) each role's demand
   (served + backlog, as ``demand_split`` reads it) is folded into a smoothed level and trend kept in
   the ``State`` (``rebalancing.forecast``, Holt's smoothing with ``forecast_alpha``; a rising trend is
   projected ``forecast_horizon_seconds`` ahead, a falling one is not). With the grown role's capacity
   measured or configured, the split of the same accelerators nearest the current one at which both
   roles run at most at ``target_utilization`` of the forecast is taken, as far as the donor holds no
   queue, is under no pressure and keeps ``donor_keeps`` (fewer instances when the whole way is
   refused). Hysteresis: only after ``forecast_warmup`` intervals of forecast, when the same direction
   was wanted ``forecast_intervals`` intervals in a row, never reversing a move within
   ``flap_window_seconds``, and only when the busier role's forecast utilization (relative to the
   target) falls by at least ``forecast_gain``. Its explanation gives the forecast (level and trend),
   the capacities (measured, or a lower bound) and both roles' utilizations before and after.
   A breach building but not yet held (``breach_pending``) is judged by this rule first.
8. ``idle_release`` (only with ``release_idle``): a role far below its SLO for ``idle_intervals``
   gives back one instance if the rest keep ``idle_headroom``.
9. ``steady``: nothing to do.
"""

from __future__ import annotations

from dataclasses import replace

from rebalancing import demand, demand_rules, forecast, staging
from rebalancing.inputs import OTHER, ROLES, Limits, Observation, Params, State, split_problem
from rebalancing.verdicts import Verdict, breach_text, donor_floor, hold, ms, queued

__all__ = [
    "OTHER",
    "ROLES",
    "Limits",
    "Observation",
    "Params",
    "State",
    "Verdict",
    "after_move",
    "decide",
    "split_problem",
]


def cooldown_for(params: Params, state: State) -> float:
    """A move's cooldown: the configured one, or what the move cost plus settling, whichever is longer."""
    return max(
        params.cooldown_seconds, state.last_move_seconds + params.settle_intervals * params.interval_seconds
    )


def ttft_pressure(obs: Observation, params: Params) -> bool:
    """Prefill is short: its queue is long, or TTFT misses its target and the delay is not decode's queue."""
    if queued(obs, "prefill", params):
        return True
    if obs.ttft_p95_ms is None or obs.ttft_p95_ms <= obs.ttft_target_ms:
        return False
    return not queued(obs, "decode", params)


def tbt_pressure(obs: Observation, params: Params) -> bool:
    """Decode is short: TBT misses its target, its KV cache is nearly full, or requests queue before it."""
    if obs.tbt_p95_ms is not None and obs.tbt_p95_ms > obs.tbt_target_ms:
        return True
    if queued(obs, "decode", params):
        return True
    return obs.decode_kv_usage is not None and obs.decode_kv_usage > params.kv_usage_high


def donor_still_meets(obs: Observation, donor: str, headroom: float) -> tuple[bool, str]:
    """Would the donor role meet its SLO with one instance fewer (its load spread over n-1)?"""
    count = obs.prefill if donor == "prefill" else obs.decode
    if count <= 1:
        return False, f"{donor} has a single instance"
    scale = count / (count - 1)
    if donor == "prefill":
        own = obs.prefill_ttft_p95_ms
        observed, target = (own if own is not None else obs.ttft_p95_ms), obs.ttft_target_ms
        label = "TTFT p95"
    else:
        observed, target = obs.tbt_p95_ms, obs.tbt_target_ms
        label = "TBT p95"
    if observed is None:
        return False, f"{donor} {label} has no data"
    waiting = obs.prefill_waiting if donor == "prefill" else obs.decode_waiting
    if waiting / (count - 1) > 1.0:
        return False, f"{waiting:.0f} requests wait on {donor}; {count - 1} instances would queue them longer"
    predicted = observed * scale
    if predicted > headroom * target:
        return False, (
            f"{donor} {label} {ms(observed)} would reach about {ms(predicted)} on {count - 1} instances, "
            f"above {headroom:.0%} of its {ms(target)} target"
        )
    if donor == "decode" and obs.decode_kv_usage is not None and obs.decode_kv_usage * scale > 0.9:
        return False, f"decode KV usage {obs.decode_kv_usage:.0%} would exceed 90 % on {count - 1} instances"
    return True, f"{donor} {label} {ms(observed)} < {ms(target)} target"


def _streaks(obs: Observation, params: Params, state: State) -> State:
    ttft = ttft_pressure(obs, params)
    tbt = tbt_pressure(obs, params)
    idle = (
        not ttft
        and not tbt
        and obs.ttft_p95_ms is not None
        and obs.tbt_p95_ms is not None
        and obs.ttft_p95_ms < params.idle_headroom * obs.ttft_target_ms
        and obs.tbt_p95_ms < params.idle_headroom * obs.tbt_target_ms
    )
    return replace(
        state,
        ttft_streak=state.ttft_streak + 1 if ttft else 0,
        tbt_streak=state.tbt_streak + 1 if tbt else 0,
        idle_streak=state.idle_streak + 1 if idle else 0,
    )


def _grow(
    obs: Observation, role: str, streak: int, params: Params, limits: Limits, need: demand.Demand
) -> Verdict:
    why = breach_text(obs, role, streak, params)
    other = OTHER[role]
    prefill, decode = obs.prefill, obs.decode
    grown = (prefill + 1, decode) if role == "prefill" else (prefill, decode + 1)
    problem = split_problem(limits, *grown)
    rule = "ttft_breach" if role == "prefill" else "tbt_breach"
    if not problem:
        return Verdict(rule, f"add_{role}", grown[0], grown[1], f"add one {role}: {why}")
    at_budget = limits.cost(*grown) > limits.budget
    if not at_budget:
        return hold(obs, rule, f"{why}, but {problem}")
    moved = (prefill + 1, decode - 1) if role == "prefill" else (prefill - 1, decode + 1)
    problem = split_problem(limits, *moved)
    if problem:
        return hold(obs, rule, f"{why}, budget full, and moving one {other} is not allowed: {problem}")
    ok, donor = donor_still_meets(obs, other, params.headroom)
    floor = donor_floor(prefill + decode, params)
    left = moved[1] if other == "decode" else moved[0]
    if ok and left < floor:
        ok, donor = False, f"{other} keeps at least {floor} instances (donor_keeps)"
    if ok and params.demand_split:
        busy = demand_rules.donor_overloaded(need, other, left, params)
        if busy:
            ok, donor = False, busy
    if not ok:
        return hold(obs, rule, f"{why}, budget full; no {other} can be spared: {donor}")
    return Verdict(
        rule, f"move_to_{role}", moved[0], moved[1], f"one {other} → {role}: {why}, {donor}, budget full"
    )


def decide(obs: Observation, params: Params, limits: Limits, state: State) -> tuple[Verdict, State]:
    """One planner interval. Pure: the same inputs give the same verdict and state."""
    verdict, state, load = _judge(obs, params, limits, state)
    if verdict.rule == "breach_pending" and load is not None:
        staged = staging.ahead(obs, params, limits, state, load, _needed(obs, params, state))
        if staged is not None:
            return staged
    if state.staged_role:
        return staging.follow(obs, state, verdict)
    return verdict, state


def _needed(obs: Observation, params: Params, state: State) -> dict[str, int]:
    """Intervals of breach each role needs before a move: ``breach_intervals``, twice that to reverse the
    previous move within ``flap_window_seconds`` (hysteresis)."""
    need = params.breach_intervals
    recent = state.last_move_ts is not None and obs.ts - state.last_move_ts < params.flap_window_seconds
    return {
        "prefill": 2 * need if recent and state.last_direction == "decode" else need,
        "decode": 2 * need if recent and state.last_direction == "prefill" else need,
    }


def _judge(
    obs: Observation, params: Params, limits: Limits, state: State
) -> tuple[Verdict, State, demand.Demand | None]:
    """The verdict of the rules in order, the new state, and the demand when it was computed."""
    if obs.stale or (obs.ttft_p95_ms is None and obs.tbt_p95_ms is None):
        reason = "telemetry is stale" if obs.stale else "no request finished in the last interval"
        return (
            hold(obs, "no_data", f"nothing to judge: {reason}"),
            replace(state, ttft_streak=0, tbt_streak=0, idle_streak=0),
            None,
        )
    if obs.links_down:
        names = ", ".join(obs.links_down[:3]) + (" …" if len(obs.links_down) > 3 else "")
        return (
            hold(
                obs,
                "links_unhealthy",
                f"KV link {names} down: a broken link is a link problem, not a ratio problem; "
                "the planner waits until the links are healthy",
            ),
            replace(state, ttft_streak=0, tbt_streak=0, idle_streak=0),
            None,
        )
    queued_before = {"prefill": state.prefill_waiting_last, "decode": state.decode_waiting_last}
    state = replace(
        demand.learn(obs, _streaks(obs, params, state)),
        prefill_waiting_last=obs.prefill_waiting,
        decode_waiting_last=obs.decode_waiting,
    )
    if obs.busy:
        return hold(obs, "busy", f"no move while {obs.busy}"), state, None
    # Demand and capacities, once per interval (the breach rules size and check their moves by them, the
    # forecast smooths it, in cooldown too).
    load = demand.demand(obs, params, state, queued_before)
    if params.forecast_split:
        state = forecast.observe(state, load, params)
    if state.last_move_ts is not None:
        wait = cooldown_for(params, state)
        age = obs.ts - state.last_move_ts
        if age < wait:
            return (
                hold(obs, "cooldown", f"cooling down after the last move ({age:.0f} s of {wait:.0f} s)"),
                state,
                None,
            )
    needed = _needed(obs, params, state)
    verdict, state = _rules(obs, params, limits, state, load, queued_before, needed)
    return verdict, state, load


def _rules(
    obs: Observation,
    params: Params,
    limits: Limits,
    state: State,
    load: demand.Demand,
    queued_before: dict[str, float | None],
    needed: dict[str, int],
) -> tuple[Verdict, State]:
    ttft_need, tbt_need = needed["prefill"], needed["decode"]
    ttft_on = state.ttft_streak >= ttft_need
    tbt_on = state.tbt_streak >= tbt_need
    if ttft_on and tbt_on:
        grown_p = split_problem(limits, obs.prefill + 1, obs.decode)
        grown_d = split_problem(limits, obs.prefill, obs.decode + 1)
        ttft_ratio = (obs.ttft_p95_ms or 0) / obs.ttft_target_ms
        tbt_ratio = (obs.tbt_p95_ms or 0) / obs.tbt_target_ms
        first = "prefill" if ttft_ratio >= tbt_ratio else "decode"
        if not (grown_p if first == "prefill" else grown_d):
            verdict = _grow(
                obs,
                first,
                state.ttft_streak if first == "prefill" else state.tbt_streak,
                params,
                limits,
                load,
            )
            return replace(verdict, rule="both_breached"), state
        return hold(
            obs,
            "both_breached",
            f"both roles miss their SLO ({breach_text(obs, 'prefill', state.ttft_streak, params)}; "
            f"{breach_text(obs, 'decode', state.tbt_streak, params)}) and the budget is full: "
            "more accelerators are needed, moving one role would hurt the other",
        ), state
    if ttft_on != tbt_on and params.demand_split:
        role = "prefill" if ttft_on else "decode"
        streak = state.ttft_streak if ttft_on else state.tbt_streak
        draining = demand_rules.draining(obs, role, queued_before[role], params)
        if draining:
            return hold(
                obs, "backlog_draining", f"{breach_text(obs, role, streak, params)}, but {draining}"
            ), state
        predicted = demand_rules.demand_move(obs, role, streak, params, limits, load)
        if predicted is not None:
            return predicted, state
    if ttft_on:
        return _grow(obs, "prefill", state.ttft_streak, params, limits, load), state
    if tbt_on:
        return _grow(obs, "decode", state.tbt_streak, params, limits, load), state
    if params.forecast_split:
        pressure = {"prefill": state.ttft_streak > 0, "decode": state.tbt_streak > 0}
        early, state = forecast.move(obs, params, limits, state, load, pressure)
        if early is not None:
            return early, state
    if state.ttft_streak or state.tbt_streak:
        role = "prefill" if state.ttft_streak else "decode"
        streak = max(state.ttft_streak, state.tbt_streak)
        wanted = ttft_need if role == "prefill" else tbt_need
        return hold(
            obs,
            "breach_pending",
            f"{breach_text(obs, role, streak, params)}; waiting for {wanted} before acting",
        ), state
    if params.release_idle and state.idle_streak >= params.idle_intervals:
        for role in ("prefill", "decode"):
            smaller = (obs.prefill - 1, obs.decode) if role == "prefill" else (obs.prefill, obs.decode - 1)
            if split_problem(limits, *smaller):
                continue
            ok, why = donor_still_meets(obs, role, params.idle_headroom)
            if ok:
                return Verdict(
                    "idle_release",
                    f"remove_{role}",
                    smaller[0],
                    smaller[1],
                    f"release one {role}: {why} with {params.idle_headroom:.0%} headroom "
                    f"for {state.idle_streak} intervals",
                ), state
    return hold(
        obs,
        "steady",
        f"within SLO: TTFT p95 {ms(obs.ttft_p95_ms)} (target {ms(obs.ttft_target_ms)}), "
        f"TBT p95 {ms(obs.tbt_p95_ms)} (target {ms(obs.tbt_target_ms)})",
    ), state


def after_move(state: State, verdict: Verdict, ts: float, seconds: float) -> State:
    """The state once a verdict's move was carried out (it took ``seconds``)."""
    gained = "prefill" if verdict.action in ("add_prefill", "move_to_prefill") else "decode"
    if verdict.action.startswith("remove_"):
        gained = ""
    return replace(
        state,
        last_move_ts=ts,
        last_move_seconds=seconds,
        last_direction=gained,
        ttft_streak=0,
        tbt_streak=0,
        idle_streak=0,
        forecast_role="",
        forecast_streak=0,
    )
