"""What the simulator replays and reports: requests, their outcomes, what a controller sees at a tick, and
the instances of a simulated cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from perfmodel.model.engine import ModelEngine

GROUP = "g0"


@dataclass(frozen=True)
class SimRequest:
    at: float  # seconds after the start
    prompt_len: int
    output_len: int
    prefix: int = -1  # shared-prefix id (-1: none)
    prefix_len: int = 0  # tokens of the shared prefix (part of prompt_len)
    kind: str = "normal"


@dataclass
class Outcome:
    at: float
    kind: str
    ok: bool
    error: str | None = None
    ttft: float | None = None  # seconds from the request's arrival
    prefill_ttft: float | None = None  # seconds from arrival to the prefill instance's first token
    tbt: float | None = None  # mean time between tokens
    gaps: list[float] = field(default_factory=list)  # each token gap as a streaming client sees it
    finished: float = 0.0


@dataclass(frozen=True)
class ClusterView:
    """What a controller sees at a tick (latencies in ms over the last interval; None = no data)."""

    ts: float
    prefill: int  # instances per role, loading ones included, draining ones not
    decode: int
    ready_prefill: int
    ready_decode: int
    busy: bool
    ttft_p95_ms: float | None
    tbt_p95_ms: float | None
    prefill_ttft_p95_ms: float | None
    prefill_waiting: float
    decode_waiting: float
    decode_kv_usage: float | None
    prompt_tps: float
    gen_tps: float
    finished: int
    # Like the per-role telemetry Tandem collects: prefix-cache hit rate of the prefill role's prompt
    # tokens, requests each role finished per second, sequences in decode's running batch.
    prefill_hit_rate: float | None = None
    prefill_requests_ps: float | None = None
    decode_requests_ps: float | None = None
    decode_running: float | None = None


@dataclass(frozen=True)
class Stage:
    """A controller's request to take a move's donors out of routing ahead of the move (they drain while
    it is confirmed); ``unstage`` routes them again."""

    prefill: int  # the staged move's target split
    decode: int
    unstage: bool = False


Controller = Callable[[ClusterView], "tuple[int, int] | Stage | None"]


@dataclass
class Instance:
    engine: ModelEngine
    role: str
    state: str  # loading | ready | staged (out of routing ahead of a move) | draining
    ready_at: float
