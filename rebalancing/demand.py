"""Demand and per-instance capacity: the planner's predictive split (PURE).

The planner learns what one instance of each role serves from the telemetry it already reads:

- a prefill instance: prompt tokens it computes per second (``prompt_tps × (1 − prefix hit rate)``
  over its ready instances), sampled while requests queue on prefill (it then works at full speed);
- a decode instance: tokens it generates per second within the TBT target, sampled while requests
  queue on decode or TBT misses its target (then scaled by target / observed TBT).

Every served rate is a lower bound of the capacity, so the estimate is the highest rate seen; an
interval at full speed (a queue) also lets it decay by ``DECAY`` toward that interval's rate, so it
follows a slower mix (longer contexts on decode) within a few minutes. Until a queue shows the full
speed, an estimate from light load is conservative (it overstates utilization), and it counts as
*measured* only once at least ``FULL_QUEUE`` requests per instance queued while it was taken: only a
measured (or configured) capacity may refuse a donor (``demand_rules.donor_overloaded``).

Demand per role is what the role served plus its backlog, the requests waiting on it times their mean
size (tokens per finished request): once as the excess that arrived while the breach lasted (the
queue's growth rate over the streak, or over the last interval when it grows faster now: a step in the
mix), once spread over ``drain_seconds`` (clearing it). With both capacities known,
``balanced_split`` picks the split of the same accelerators nearest the current one that keeps each
role at or below its target utilization.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from rebalancing.inputs import Limits, Observation, Params, State, split_problem

DECAY = 0.97  # per saturated interval: how fast an estimate falls to a lower full-speed rate
# Requests waiting per Ready instance at which a role's served rate is its capacity, not a bound: a short
# queue comes and goes with bursts while the instances still have room.
FULL_QUEUE = 4.0


@dataclass(frozen=True)
class Demand:
    prefill_tps: float  # prompt tokens/s to compute (uncached), backlog included
    decode_tps: float  # tokens/s to generate, backlog included
    prefill_capacity: float | None  # per instance
    decode_capacity: float | None

    prefill_measured: bool = False  # configured, or learned at full speed (not only a lower bound)
    decode_measured: bool = False

    def utilization(self, role: str, count: int) -> float | None:
        """Demand over what ``count`` instances of the role serve (None when the capacity is unknown)."""
        capacity = self.prefill_capacity if role == "prefill" else self.decode_capacity
        need = self.prefill_tps if role == "prefill" else self.decode_tps
        if capacity is None or capacity <= 0:
            return None
        if count <= 0:
            return float("inf") if need > 0 else 0.0
        return need / (count * capacity)


def _ready(obs: Observation, role: str) -> int:
    ready = obs.prefill_ready if role == "prefill" else obs.decode_ready
    desired = obs.prefill if role == "prefill" else obs.decode
    return desired if ready is None else ready


def computed_prompt_tps(obs: Observation) -> float | None:
    if obs.prompt_tps is None:
        return None
    return float(obs.prompt_tps) * (1.0 - min(1.0, max(0.0, obs.prefill_hit_rate or 0.0)))


def prefill_saturated(obs: Observation) -> bool:
    ready = _ready(obs, "prefill")
    return ready > 0 and obs.prefill_waiting / ready >= 1.0


def decode_saturated(obs: Observation) -> bool:
    ready = _ready(obs, "decode")
    if ready <= 0:
        return False
    if obs.tbt_p95_ms is not None and obs.tbt_p95_ms > obs.tbt_target_ms:
        return True
    return obs.decode_waiting / ready >= 1.0


def _learn(old: float | None, sample: float | None, saturated: bool) -> float | None:
    if sample is None or sample <= 0:
        return old
    if old is None:
        return sample
    return max(old * DECAY, sample) if saturated else max(old, sample)


def learn(obs: Observation, state: State) -> State:
    """The state with this interval's per-instance rates folded into the capacity estimates."""
    if obs.stale or obs.busy:  # a move changes the instance count under the rates: skip it
        return state
    p_ready, d_ready = _ready(obs, "prefill"), _ready(obs, "decode")
    computed = computed_prompt_tps(obs)
    p_sample = computed / p_ready if computed is not None and p_ready > 0 else None
    d_sample = float(obs.gen_tps) / d_ready if obs.gen_tps is not None and d_ready > 0 else None
    if d_sample is not None and obs.tbt_p95_ms and obs.tbt_p95_ms > obs.tbt_target_ms:
        # Served with TBT above its target: within the target an instance serves about that much less.
        d_sample *= obs.tbt_target_ms / obs.tbt_p95_ms
    p_full = p_ready > 0 and obs.prefill_waiting / p_ready >= FULL_QUEUE
    d_full = d_ready > 0 and (
        obs.decode_waiting / d_ready >= FULL_QUEUE
        or (obs.tbt_p95_ms is not None and obs.tbt_p95_ms > obs.tbt_target_ms)
    )
    if state.staged_role == "decode":  # the staged prefills left routing: the rest queue by our choice
        p_sample, p_full = None, False
    if state.staged_role == "prefill":
        d_sample, d_full = None, False
    return replace(
        state,
        prefill_capacity_tps=_learn(state.prefill_capacity_tps, p_sample, prefill_saturated(obs)),
        decode_capacity_tps=_learn(state.decode_capacity_tps, d_sample, decode_saturated(obs)),
        prefill_capacity_measured=state.prefill_capacity_measured or (p_full and bool(p_sample)),
        decode_capacity_measured=state.decode_capacity_measured or (d_full and bool(d_sample)),
    )


def _capacity(configured: float, learned: float | None) -> float | None:
    return configured if configured > 0 else learned


def demand(
    obs: Observation, params: Params, state: State, before: Mapping[str, float | None] | None = None
) -> Demand:
    """Per-role demand (served rate + backlog) and the per-instance capacities (configured or learned).
    ``before``: each role's queue one interval ago, when known (how fast it grows now)."""
    computed = computed_prompt_tps(obs) or 0.0
    gen = float(obs.gen_tps or 0.0)
    drain = max(params.interval_seconds, params.drain_seconds)
    interval = params.interval_seconds
    before = before or {}

    def backlog(
        waiting: float, last: float | None, rate: float, requests_ps: float | None, streak: int
    ) -> float:
        # A role at full speed serves its capacity, not its demand: the queue it built is the excess
        # arriving (on average over the breach's streak, or in the last interval if it grows faster
        # now: a step in the mix), and clearing it adds its size over `drain`.
        if waiting <= 0 or not requests_ps:
            return 0.0
        size = rate / requests_ps  # tokens per request
        tokens = waiting * size
        excess = tokens / max(interval, streak * interval)
        if last is not None and waiting > last:
            excess = max(excess, (waiting - last) * size / interval)
        return excess + tokens / drain

    p_backlog = backlog(
        obs.prefill_waiting, before.get("prefill"), computed, obs.prefill_requests_ps, state.ttft_streak
    )
    d_backlog = backlog(
        obs.decode_waiting, before.get("decode"), gen, obs.decode_requests_ps, state.tbt_streak
    )
    return Demand(
        prefill_tps=computed + p_backlog,
        decode_tps=gen + d_backlog,
        prefill_capacity=_capacity(params.prefill_tokens_per_s, state.prefill_capacity_tps),
        decode_capacity=_capacity(params.decode_tokens_per_s, state.decode_capacity_tps),
        prefill_measured=params.prefill_tokens_per_s > 0 or state.prefill_capacity_measured,
        decode_measured=params.decode_tokens_per_s > 0 or state.decode_capacity_measured,
    )


def balanced_split(
    need: Demand, prefill: int, decode: int, limits: Limits, prefill_target: float, decode_target: float
) -> tuple[int, int] | None:
    """The split of the same accelerators nearest the current one at which each role runs at or below
    its target utilization; when none does, the one whose busier role is least over its target. Within
    the bounds and the ratio constraint; None when a capacity is unknown. Staying near the current split
    keeps the move short (each instance moved costs a drain and a model load) and leaves the other role
    room for the next shift."""
    if need.prefill_capacity is None or need.decode_capacity is None:
        return None
    total = limits.cost(prefill, decode)
    best: tuple[bool, float, int, tuple[int, int]] | None = None
    for p in range(1, prefill + decode + 1):
        spare = total - p * limits.prefill_accelerators
        if spare < limits.decode_accelerators:
            break
        d = spare // limits.decode_accelerators
        if split_problem(limits, p, d):
            continue
        over = max(
            (need.utilization("prefill", p) or 0.0) / prefill_target,
            (need.utilization("decode", d) or 0.0) / decode_target,
        )
        fits = over <= 1.0
        key = (not fits, 0.0 if fits else round(over, 3), abs(p - prefill), (p, d))
        if best is None or key < best:
            best = key
    return best[3] if best is not None else None
