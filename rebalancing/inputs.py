"""What the planner's policy reads and keeps (PURE): its parameters, the topology's limits, one
interval's observation, the state carried between intervals, and whether a split is allowed."""

from __future__ import annotations

from dataclasses import dataclass, field

ROLES = ("prefill", "decode")
OTHER = {"prefill": "decode", "decode": "prefill"}


@dataclass(frozen=True)
class Params:
    interval_seconds: float = 5.0
    breach_intervals: int = 3
    cooldown_seconds: float = 30.0
    settle_intervals: int = 2
    headroom: float = 0.8  # an opposing move keeps the donor below 80 % of its SLO (and of its capacity)
    flap_window_seconds: float = 120.0
    queue_per_instance: float = 4.0  # prefill waiting per instance counted as TTFT pressure
    kv_usage_high: float = 0.9  # decode KV usage counted as TBT pressure
    release_idle: bool = False
    idle_intervals: int = 12
    idle_headroom: float = 0.5
    # The predictive split (rebalancing.demand): per-instance capacities, configured from a profile or
    # (0) learned from the telemetry; a breached role's move goes straight to the balanced split.
    demand_split: bool = True
    prefill_tokens_per_s: float = 0.0  # uncached prompt tokens one prefill instance computes per second
    decode_tokens_per_s: float = 0.0  # tokens one decode instance generates per second within the TBT target
    drain_seconds: float = 30.0  # a queued backlog counts as demand spread over this long
    target_utilization: float = 0.8  # the breached role is sized to run at most this busy
    # A move at the budget leaves the donor at least this many instances (at most a third of them): a
    # single instance cannot absorb the next shift of the mix.
    donor_keeps: int = 2
    # With in-place switches, a breach the demand says a move at the budget meets takes that move's donors
    # out of routing at its first interval, so they drain while the breach is confirmed (``staging``).
    stage_ahead: bool = True
    # The forecast (rebalancing.forecast): a smoothed demand per role moves the split before a breach
    # holds, with hysteresis (``forecast_intervals`` in a row, never reversing a move within
    # ``flap_window_seconds``) and only for a gain of at least ``forecast_gain``.
    forecast_split: bool = True
    forecast_alpha: float = 0.3  # weight of the newest interval in the smoothed demand and its trend
    forecast_horizon_seconds: float = 30.0  # how far ahead the trend is projected
    forecast_warmup: int = 6  # intervals of demand before the forecast may move
    forecast_intervals: int = 2  # intervals in a row the same direction is wanted before it moves
    forecast_gain: float = 0.1  # the least drop in the busier role's utilization (relative to target)


@dataclass(frozen=True)
class Limits:
    prefill_min: int
    prefill_max: int
    decode_min: int
    decode_max: int
    budget: int  # accelerators
    prefill_accelerators: int = 1  # per instance
    decode_accelerators: int = 1
    min_ratio: float | None = None  # prefill / decode
    max_ratio: float | None = None

    def bounds(self, role: str) -> tuple[int, int]:
        return (
            (self.prefill_min, self.prefill_max) if role == "prefill" else (self.decode_min, self.decode_max)
        )

    def cost(self, prefill: int, decode: int) -> int:
        return prefill * self.prefill_accelerators + decode * self.decode_accelerators


@dataclass(frozen=True)
class Observation:
    """What the planner sees at one interval (latencies in ms; None = no data)."""

    ts: float
    prefill: int  # current replicas per role (the spec moved by in-place switches: the served split)
    decode: int
    ttft_p95_ms: float | None
    tbt_p95_ms: float | None
    ttft_target_ms: float
    tbt_target_ms: float
    prefill_waiting: float = 0.0
    decode_waiting: float = 0.0
    prefill_kv_usage: float | None = None
    decode_kv_usage: float | None = None
    prompt_tps: float | None = None
    gen_tps: float | None = None
    links_down: list[str] = field(default_factory=list)
    stale: bool = False
    busy: str = ""  # why a move cannot start now ("" when free)
    prefill_ttft_p95_ms: float | None = None  # the prefill role's own share (its queue + compute)
    prefill_hit_rate: float | None = None  # prefix-cache hits / prompt tokens on prefill (0..1)
    prefill_requests_ps: float | None = None  # requests each role finished per second
    decode_requests_ps: float | None = None
    prefill_ready: int | None = None  # Ready instances per role (None: as many as desired)
    decode_ready: int | None = None
    in_place: bool = False  # the topology's moves are in-place switches (they can be staged)

    def as_dict(self) -> dict[str, object]:
        return {
            "ts": self.ts,
            "prefill": self.prefill,
            "decode": self.decode,
            "ttft_p95_ms": self.ttft_p95_ms,
            "tbt_p95_ms": self.tbt_p95_ms,
            "ttft_target_ms": self.ttft_target_ms,
            "tbt_target_ms": self.tbt_target_ms,
            "prefill_waiting": self.prefill_waiting,
            "decode_waiting": self.decode_waiting,
            "prefill_kv_usage": self.prefill_kv_usage,
            "decode_kv_usage": self.decode_kv_usage,
            "prompt_tps": self.prompt_tps,
            "gen_tps": self.gen_tps,
            "links_down": list(self.links_down),
            "stale": self.stale,
            "busy": self.busy,
            "prefill_ttft_p95_ms": self.prefill_ttft_p95_ms,
            "prefill_hit_rate": self.prefill_hit_rate,
            "prefill_requests_ps": self.prefill_requests_ps,
            "decode_requests_ps": self.decode_requests_ps,
            "prefill_ready": self.prefill_ready,
            "decode_ready": self.decode_ready,
            "in_place": self.in_place,
        }


@dataclass(frozen=True)
class State:
    ttft_streak: int = 0
    tbt_streak: int = 0
    idle_streak: int = 0
    last_move_ts: float | None = None
    last_move_seconds: float = 0.0  # how long the last move took to execute
    last_direction: str = ""  # the role that gained capacity in the last move
    prefill_capacity_tps: float | None = None  # learned per-instance capacities (rebalancing.demand)
    decode_capacity_tps: float | None = None
    # Whether an estimate was taken at full speed (a queue): only then is it the capacity, not a bound.
    prefill_capacity_measured: bool = False
    decode_capacity_measured: bool = False
    prefill_waiting_last: float | None = None  # the previous interval's queues (is a backlog clearing?)
    decode_waiting_last: float | None = None
    staged_role: str = ""  # a staged move: the role it grows and its target split
    staged_prefill: int = 0
    staged_decode: int = 0
    staged_ts: float | None = None
    # The forecast's smoothed demand (tokens/s), its trend (tokens/s per second), the intervals folded in,
    # and the direction it wanted lately and for how many intervals in a row (rebalancing.forecast).
    forecast_prefill_tps: float = 0.0
    forecast_decode_tps: float = 0.0
    forecast_prefill_trend: float = 0.0
    forecast_decode_trend: float = 0.0
    forecast_samples: int = 0
    forecast_role: str = ""
    forecast_streak: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "ttft_streak": self.ttft_streak,
            "tbt_streak": self.tbt_streak,
            "idle_streak": self.idle_streak,
            "last_move_ts": self.last_move_ts,
            "last_move_seconds": self.last_move_seconds,
            "last_direction": self.last_direction,
            "prefill_capacity_tps": self.prefill_capacity_tps,
            "decode_capacity_tps": self.decode_capacity_tps,
            "prefill_capacity_measured": self.prefill_capacity_measured,
            "decode_capacity_measured": self.decode_capacity_measured,
            "prefill_waiting_last": self.prefill_waiting_last,
            "decode_waiting_last": self.decode_waiting_last,
            "staged_role": self.staged_role,
            "staged_prefill": self.staged_prefill,
            "staged_decode": self.staged_decode,
            "staged_ts": self.staged_ts,
            "forecast_prefill_tps": self.forecast_prefill_tps,
            "forecast_decode_tps": self.forecast_decode_tps,
            "forecast_prefill_trend": self.forecast_prefill_trend,
            "forecast_decode_trend": self.forecast_decode_trend,
            "forecast_samples": self.forecast_samples,
            "forecast_role": self.forecast_role,
            "forecast_streak": self.forecast_streak,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object] | None) -> State:
        data = data or {}

        def num(key: str, default: float) -> float:
            value = data.get(key)
            return (
                float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default
            )

        last = data.get("last_move_ts")

        def optional(key: str) -> float | None:
            value = data.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return float(value)
            return None

        return cls(
            ttft_streak=int(num("ttft_streak", 0)),
            tbt_streak=int(num("tbt_streak", 0)),
            idle_streak=int(num("idle_streak", 0)),
            last_move_ts=float(last) if isinstance(last, (int, float)) else None,
            last_move_seconds=num("last_move_seconds", 0.0),
            last_direction=str(data.get("last_direction") or ""),
            prefill_capacity_tps=optional("prefill_capacity_tps"),
            decode_capacity_tps=optional("decode_capacity_tps"),
            prefill_capacity_measured=data.get("prefill_capacity_measured") is True,
            decode_capacity_measured=data.get("decode_capacity_measured") is True,
            prefill_waiting_last=optional("prefill_waiting_last"),
            decode_waiting_last=optional("decode_waiting_last"),
            staged_role=role if (role := data.get("staged_role")) in ROLES else "",
            staged_prefill=int(num("staged_prefill", 0)),
            staged_decode=int(num("staged_decode", 0)),
            staged_ts=optional("staged_ts"),
            forecast_prefill_tps=max(0.0, num("forecast_prefill_tps", 0.0)),
            forecast_decode_tps=max(0.0, num("forecast_decode_tps", 0.0)),
            forecast_prefill_trend=num("forecast_prefill_trend", 0.0),
            forecast_decode_trend=num("forecast_decode_trend", 0.0),
            forecast_samples=max(0, int(num("forecast_samples", 0))),
            forecast_role=role if (role := data.get("forecast_role")) in ROLES else "",
            forecast_streak=max(0, int(num("forecast_streak", 0))),
        )


def split_problem(limits: Limits, prefill: int, decode: int) -> str:
    """Why a split is not allowed ("" when it is): bounds, budget, ratio constraint."""
    for role, count in (("prefill", prefill), ("decode", decode)):
        lo, hi = limits.bounds(role)
        if count < lo:
            return f"{role} would drop to {count}, below its minimum of {lo}"
        if count > hi:
            return f"{role} would rise to {count}, above its maximum of {hi}"
    cost = limits.cost(prefill, decode)
    if cost > limits.budget:
        return f"{prefill}P/{decode}D needs {cost} accelerators, over the budget of {limits.budget}"
    if decode > 0:
        ratio = prefill / decode
        if limits.min_ratio is not None and ratio < limits.min_ratio - 1e-9:
            return (
                f"P:D ratio {ratio:.2f} would be below the ratio constraint's minRatio {limits.min_ratio:g}"
            )
        if limits.max_ratio is not None and ratio > limits.max_ratio + 1e-9:
            return (
                f"P:D ratio {ratio:.2f} would be above the ratio constraint's maxRatio {limits.max_ratio:g}"
            )
    return ""
