"""The planner's forecast (PURE): a smoothed demand per role, and a move to the split it needs before a
breach holds. ``rebalancing.policy.decide`` calls ``observe`` every free interval and ``move`` once no
sustained breach has decided.

Each interval's demand per role (``rebalancing.demand``: what the role served plus its backlog, in
uncached prompt tokens/s and generated tokens/s) is folded into a level and a trend (Holt's double
exponential smoothing, kept in the planner's ``State``): ``forecast_alpha`` weighs the new sample,
the trend is smoothed the same way and projected ``forecast_horizon_seconds`` ahead (a move and its
settling) when it rises; a falling trend is not projected (no role is sized below what it serves now
on the strength of a guess). Demand is per role, not per instance, so it survives a
move: the level needs no reset when the split changes.

``move`` sizes both roles on the forecast with the per-instance capacities ``rebalancing.demand``
learns (or the configured ones): the split of the same accelerators nearest the current one that runs
each role at or below ``target_utilization`` (``demand.balanced_split``). It moves there only

- after ``forecast_warmup`` intervals of forecast (a level from one interval is a burst, not a load);
- when the role it grows has a capacity measured at full speed or configured (a rate seen under light
  load is a lower bound, which would overstate what the role needs; the donor's may be a lower bound,
  which only makes it keep more);
- when that split lowers the busier role's forecast utilization, relative to its target, by at least
  ``forecast_gain`` (no move for a small gain; a split that already fits its targets is kept);
- when the same direction was wanted for ``forecast_intervals`` intervals in a row (a burst that
  passes wants nothing);
- when it does not reverse the last move within ``flap_window_seconds`` (hysteresis: it never flaps;
  a real shift back is the breach rules' to judge, with their doubled streak);
- when the donor holds no queue, is not itself under pressure, keeps its floor (``donor_keeps``) and,
  for decode, its KV usage stays below ``kv_usage_high`` on fewer instances.

Fewer instances are moved when the whole way is refused. The sentence gives the forecast (level and
trend), the capacities (measured at full speed, or still a lower bound) and both roles' utilizations
before and after.
"""

from __future__ import annotations

from dataclasses import replace

from rebalancing import demand
from rebalancing.inputs import OTHER, Limits, Observation, Params, State, split_problem
from rebalancing.verdicts import Verdict, donor_floor, tps


def observe(state: State, load: demand.Demand, params: Params) -> State:
    """The state with this interval's demand folded into each role's level and trend."""
    alpha = params.forecast_alpha
    beta = params.forecast_alpha  # the trend smoothed as much as the level
    dt = params.interval_seconds
    if state.forecast_samples == 0:
        return replace(
            state,
            forecast_prefill_tps=load.prefill_tps,
            forecast_decode_tps=load.decode_tps,
            forecast_prefill_trend=0.0,
            forecast_decode_trend=0.0,
            forecast_samples=1,
        )

    def holt(level: float, trend: float, sample: float) -> tuple[float, float]:
        new = alpha * sample + (1 - alpha) * (level + trend * dt)
        return new, beta * (new - level) / dt + (1 - beta) * trend

    p_level, p_trend = holt(state.forecast_prefill_tps, state.forecast_prefill_trend, load.prefill_tps)
    d_level, d_trend = holt(state.forecast_decode_tps, state.forecast_decode_trend, load.decode_tps)
    return replace(
        state,
        forecast_prefill_tps=max(0.0, p_level),
        forecast_decode_tps=max(0.0, d_level),
        forecast_prefill_trend=p_trend,
        forecast_decode_trend=d_trend,
        forecast_samples=state.forecast_samples + 1,
    )


def predicted(state: State, params: Params) -> tuple[float, float]:
    """Prompt and generation demand ``forecast_horizon_seconds`` ahead (tokens/s): a rising trend is
    projected, a falling one is not (the level stands: a role is never sized below what it serves now
    on the strength of a guess)."""
    ahead = params.forecast_horizon_seconds
    return (
        state.forecast_prefill_tps + max(0.0, state.forecast_prefill_trend) * ahead,
        state.forecast_decode_tps + max(0.0, state.forecast_decode_trend) * ahead,
    )


def _over(need: demand.Demand, prefill: int, decode: int, target: float) -> float:
    """The busier role's utilization relative to the target (1.0: at its target)."""
    prefill_use = need.utilization("prefill", prefill) or 0.0
    return max(prefill_use, need.utilization("decode", decode) or 0.0) / target


def _refusal(
    obs: Observation, donor: str, left: int, pressure: dict[str, bool], params: Params, total: int
) -> str:
    """Why the donor cannot give up instances down to ``left`` ("" when it can)."""
    if pressure[donor]:
        return f"{donor} is under pressure itself"
    if left < donor_floor(total, params):
        return f"{donor} keeps at least {donor_floor(total, params)} instances (donor_keeps)"
    waiting = obs.prefill_waiting if donor == "prefill" else obs.decode_waiting
    if waiting / left > 1.0:
        return f"{waiting:.0f} requests wait on {donor}"
    count = obs.prefill if donor == "prefill" else obs.decode
    kv = obs.decode_kv_usage
    if donor == "decode" and kv is not None and kv * count / left > params.kv_usage_high:
        return f"decode KV usage {kv:.0%} would pass {params.kv_usage_high:.0%} on {left} instances"
    return ""


def move(
    obs: Observation,
    params: Params,
    limits: Limits,
    state: State,
    load: demand.Demand,
    pressure: dict[str, bool],
) -> tuple[Verdict | None, State]:
    """The forecast's move (None: none wanted, or not yet), and the state with its streak. ``load``
    gives this interval's capacities; ``pressure``: whether each role breaches now (not yet held)."""
    idle = replace(state, forecast_role="", forecast_streak=0)
    if state.forecast_samples < params.forecast_warmup:
        return None, idle
    p_tps, d_tps = predicted(state, params)
    need = replace(load, prefill_tps=p_tps, decode_tps=d_tps)
    target_use = params.target_utilization
    split = demand.balanced_split(need, obs.prefill, obs.decode, limits, target_use, target_use)
    if split is None or split[0] == obs.prefill:
        return None, idle
    role = "prefill" if split[0] > obs.prefill else "decode"
    donor = OTHER[role]
    if not (need.prefill_measured if role == "prefill" else need.decode_measured):
        # A capacity seen only under light load is a lower bound: it would overstate what the role needs.
        return None, idle
    recent = state.last_move_ts is not None and obs.ts - state.last_move_ts < params.flap_window_seconds
    if recent and state.last_direction == donor:
        return None, idle
    before = _over(need, obs.prefill, obs.decode, target_use)
    total = obs.prefill + obs.decode
    donor_now = obs.decode if role == "prefill" else obs.prefill
    wanted = abs(split[0] - obs.prefill)
    chosen: tuple[int, int] | None = None
    for gained in range(wanted, 0, -1):
        left = donor_now - gained
        candidate = (obs.prefill + gained, left) if role == "prefill" else (left, obs.decode + gained)
        if split_problem(limits, *candidate) or _refusal(obs, donor, left, pressure, params, total):
            continue
        if before - _over(need, *candidate, target_use) >= params.forecast_gain:
            chosen = candidate
            break
    if chosen is None:
        return None, idle
    streak = state.forecast_streak + 1 if state.forecast_role == role else 1
    state = replace(state, forecast_role=role, forecast_streak=streak)
    if streak < params.forecast_intervals:
        return None, state
    after = _over(need, *chosen, target_use)
    gained = abs(chosen[0] - obs.prefill)

    def capacity(which: str) -> str:
        cap = need.prefill_capacity if which == "prefill" else need.decode_capacity
        measured = need.prefill_measured if which == "prefill" else need.decode_measured
        return f"{tps(cap or 0.0)} each ({'measured' if measured else 'a lower bound'})"

    def uses(prefill: int, decode: int) -> str:
        p_use = need.utilization("prefill", prefill) or 0.0
        d_use = need.utilization("decode", decode) or 0.0
        return f"at {prefill}P/{decode}D prefill would run at {p_use:.0%}, decode at {d_use:.0%}"

    text = (
        f"{gained} {donor} → {role} ({obs.prefill}P/{obs.decode}D → {chosen[0]}P/{chosen[1]}D) before a "
        f"breach holds: forecast {params.forecast_horizon_seconds:.0f} s ahead, prompt demand {tps(p_tps)} "
        f"uncached (smoothed {tps(state.forecast_prefill_tps)}, trend "
        f"{state.forecast_prefill_trend:+.0f} tok/s per s) at {capacity('prefill')}, generation "
        f"{tps(d_tps)} (smoothed {tps(state.forecast_decode_tps)}, trend "
        f"{state.forecast_decode_trend:+.0f} tok/s per s) at {capacity('decode')}; "
        f"{uses(obs.prefill, obs.decode)}; {uses(*chosen)} (target {target_use:.0%}: the busier role "
        f"{before:.2f} → {after:.2f} of it, gain ≥ {params.forecast_gain:.2f}), wanted for {streak} "
        f"intervals"
    )
    return Verdict("forecast_split", f"move_to_{role}", chosen[0], chosen[1], text), state
