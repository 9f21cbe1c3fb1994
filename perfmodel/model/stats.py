"""One engine's statistics, counted by the performance model as it runs (tokens, prefix-cache queries and
hits, preemptions, finishes, latency histograms with vLLM's buckets), and the quantile the simulator
reports. The sandbox's engines render them as each engine's own ``/metrics`` (``sandbox/engine/metrics.py``);
the simulator reads them as the per-role telemetry Tandem collects.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class Histogram:
    """Cumulative-on-render histogram: `counts[i]` holds observations in bucket i (non-cumulative)."""

    __slots__ = ("buckets", "count", "counts", "total")

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.count += 1
        self.total += value

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.1,
    0.2,
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
XFER_TIME_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0)
XFER_BYTES_BUCKETS = tuple(float(2**p) for p in range(16, 36, 2))
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")  # vLLM 0.32 exports all five
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")


@dataclass
class EngineStats:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    external_queries: int = 0
    external_hits: int = 0
    preemptions: int = 0
    failed_requests: int = 0
    failed_transfers: int = 0
    failed_recvs: int = 0  # mooncake recvs / nixl notifications / sglang bootstrap failures
    kv_expired: int = 0  # prefill: held KV that expired before a decode pulled it
    # prompt tokens by where their KV came from (vLLM's PromptTokenStats.ALL_SOURCES), counted at prefill
    prompt_sources: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PROMPT_SOURCES, 0))
    finished: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISH_REASONS, 0))
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    tpot: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    prefill: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    decode: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    xfer_time: Histogram = field(default_factory=lambda: Histogram(XFER_TIME_BUCKETS))
    xfer_bytes: Histogram = field(default_factory=lambda: Histogram(XFER_BYTES_BUCKETS))
    store_ops: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    http: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (handler, method, "2xx") -> n
    last_xfer_seconds: float = 0.0
    last_xfer_bytes: int = 0
    _throughput_mark: tuple[float, int] = (0.0, 0)

    def observe_store(self, operation: str, status: str, seconds: float) -> None:
        key = (operation, status)
        if key not in self.store_ops:
            self.store_ops[key] = Histogram(XFER_TIME_BUCKETS)
        self.store_ops[key].observe(seconds)

    def count_prompt_sources(self, *, computed: int, cache_hit: int, external: int) -> None:
        for source, tokens in zip(PROMPT_SOURCES, (computed, cache_hit, external), strict=True):
            self.prompt_sources[source] += max(0, tokens)

    def count_http(self, handler: str, method: str, status: int) -> None:
        key = (handler, method, f"{status // 100}xx")
        self.http[key] = self.http.get(key, 0) + 1

    def observe_transfer(self, seconds: float, num_bytes: int) -> None:
        self.xfer_time.observe(seconds)
        self.xfer_bytes.observe(float(num_bytes))
        self.last_xfer_seconds = seconds
        self.last_xfer_bytes = num_bytes

    def gen_throughput(self) -> float:
        """Generated tokens per second since the previous call (SGLang logs it per interval)."""
        now = time.monotonic()
        then, tokens = self._throughput_mark
        self._throughput_mark = (now, self.generation_tokens)
        if then == 0.0 or now <= then:
            return 0.0
        return (self.generation_tokens - tokens) / (now - then)
