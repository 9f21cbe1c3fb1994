"""The planner's demand-driven rules (PURE): sized moves at the budget from the measured demand and the
per-instance capacities (``rebalancing.demand``), and a backlog that clears by itself.
``rebalancing.policy.decide`` calls them in its order of rules."""

from __future__ import annotations

from rebalancing import demand
from rebalancing.inputs import OTHER, Limits, Observation, Params, split_problem
from rebalancing.verdicts import Verdict, breach_text, donor_floor, tps


def draining(obs: Observation, role: str, before: float | None, params: Params) -> str:
    """Why the role's breach clears by itself ("" when it does not): its queue shrinks fast enough to be
    empty within ``drain_seconds`` at this pace (the breach is the backlog of a shift already met)."""
    waiting = obs.prefill_waiting if role == "prefill" else obs.decode_waiting
    if before is None or waiting >= before:
        return ""
    pace = (before - waiting) / params.interval_seconds
    seconds = waiting / pace
    if seconds > params.drain_seconds:
        return ""
    return (
        f"its queue is clearing ({before:.0f} → {waiting:.0f} waiting on {role} in one interval, empty in "
        f"about {seconds:.0f} s at this pace): no move"
    )


def _queue_allowed(obs: Observation, donor: str, left: int, params: Params) -> float:
    """Requests per remaining instance the donor may hold for a move: none to speak of (one each) when its
    queue is spread over more instances than stay; up to ``queue_per_instance`` when only ``left`` of them
    are routed already (a staged move): that queue is what the remaining instances hold at this load."""
    routed = obs.prefill_ready if donor == "prefill" else obs.decode_ready
    return params.queue_per_instance if routed is not None and routed <= left else 1.0


def demand_move(
    obs: Observation, role: str, streak: int, params: Params, limits: Limits, need: demand.Demand
) -> Verdict | None:
    """``demand_split``: at the budget, a sustained breach moves the breached role straight to the
    balanced split of the measured demand, as far as the donor keeps ``headroom`` (predicted from its
    capacity) and holds no queue. None: no prediction (a capacity unknown, below the budget, or the
    balance does not favour this role): the one-instance rules decide."""
    prefill, decode = obs.prefill, obs.decode
    grown = (prefill + 1, decode) if role == "prefill" else (prefill, decode + 1)
    if limits.cost(*grown) <= limits.budget:
        return None
    # The breached role is sized to `target_utilization`, the donor keeps `headroom`.
    targets = (params.target_utilization, params.headroom)
    target = demand.balanced_split(
        need, prefill, decode, limits, *(targets if role == "prefill" else targets[::-1])
    )
    if target is None:
        return None
    current = prefill if role == "prefill" else decode
    wanted = (target[0] if role == "prefill" else target[1]) - current
    donor = OTHER[role]
    donor_now = decode if role == "prefill" else prefill
    donor_waiting = obs.decode_waiting if role == "prefill" else obs.prefill_waiting
    for gained in range(wanted, 0, -1):
        left = donor_now - gained
        split = (prefill + gained, left) if role == "prefill" else (left, decode + gained)
        if left < donor_floor(prefill + decode, params) or split_problem(limits, *split):
            continue
        use = need.utilization(donor, left)
        if (
            use is None
            or use > params.headroom
            or donor_waiting / left > _queue_allowed(obs, donor, left, params)
        ):
            continue
        kv = obs.decode_kv_usage
        if donor == "decode" and kv is not None and kv * donor_now / left > params.kv_usage_high:
            continue
        gain_use = need.utilization(role, current + gained)
        p_cap, d_cap = need.prefill_capacity or 0.0, need.decode_capacity or 0.0
        why = breach_text(obs, role, streak, params)
        return Verdict(
            "demand_split",
            f"move_to_{role}",
            split[0],
            split[1],
            f"{gained} {donor} → {role} ({prefill}P/{decode}D → {split[0]}P/{split[1]}D): {why}; "
            f"prompt demand {tps(need.prefill_tps)} uncached ≈ {need.prefill_tps / p_cap:.1f} prefill "
            f"at {tps(p_cap)} each, generation {tps(need.decode_tps)} ≈ "
            f"{need.decode_tps / d_cap:.1f} decode at {tps(d_cap)} each; {role} would run at "
            f"{(gain_use or 0.0):.0%}, {donor} at {use:.0%} (≤ {params.headroom:.0%}), budget full",
        )
    return None


def donor_overloaded(need: demand.Demand, donor: str, left: int, params: Params) -> str:
    """Why the donor's measured demand would not fit on ``left`` instances ("" when it would, or when its
    capacity is not known yet): its latency can read well within the target while its throughput is
    nearly used up (a decode serving at its full rate still keeps TBT), so the SLO alone does not tell."""
    if not (need.prefill_measured if donor == "prefill" else need.decode_measured):
        return ""  # a rate seen under light load is only a lower bound of the capacity
    use = need.utilization(donor, left)
    if use is None or use <= params.headroom:
        return ""
    rate = need.prefill_tps if donor == "prefill" else need.decode_tps
    capacity = need.prefill_capacity if donor == "prefill" else need.decode_capacity
    kind = "prompt" if donor == "prefill" else "generation"
    return (
        f"{donor} serves {tps(rate)} of {kind} demand at {tps(capacity or 0.0)} each: on {left} instances it "
        f"would run at {use:.0%} (above {params.headroom:.0%})"
    )
