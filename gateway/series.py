"""Gateway records as chart series: time buckets, rates, shares, quantiles and fallback marks (pure).

The selector aggregates the records per bucket in SQL (:func:`gateway.selectors.gateway_series`);
this module turns those per-bucket rows into the series the charts draw, and holds the same
aggregation in Python for databases without ordered-set aggregates (SQLite in standalone mode).

========================  ======================================================================
series                    value per bucket
========================  ======================================================================
``rps.cluster``           requests per second the cluster served
``rps.fallback``          requests per second the fallback upstream served
``rps.none``              requests per second refused before dispatch (key, limit, model)
``rps.verification``      requests per second the topology's verification probes made (any backend)
``share.errors``          share (0..1) of the bucket's requests answered with a 5xx
``share.refused``         share (0..1) answered with a 4xx (bad key, over a limit, unknown model)
``ttft.p50/p95``          time to the first token of the answered *streamed* requests, ms
``latency.p50/p95``       whole-request latency of the answered requests (streamed or not), ms
========================  ======================================================================

The ``rps.cluster/fallback/none`` rates count applications' requests; the verification probes' own
requests are ``rps.verification`` and nothing else among the rates, while the shares and quantiles
cover every request of the bucket, verification included. A non-streamed answer arrives whole, so
the gateway sees no first token: it has no TTFT (its latency counts in ``latency.*`` only).

A bucket without requests is ``None`` in every series (a gap, not a zero) except the rates, which
are 0: no traffic is a measured zero; a bucket whose answered requests were all non-streamed has no
TTFT (``None``). The last bucket usually ends in the future; its rates divide by
the part that has elapsed, so the line does not dip at the right edge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

SERIES: tuple[str, ...] = (
    "rps.cluster",
    "rps.fallback",
    "rps.none",
    "rps.verification",
    "share.errors",
    "share.refused",
    "ttft.p50",
    "ttft.p95",
    "latency.p50",
    "latency.p95",
)
STEPS: tuple[int, ...] = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
TARGET_BUCKETS = 120
MAX_BUCKETS = 2000
QUANTILES: tuple[float, float] = (0.5, 0.95)
# The windows the charts offer (seconds, label).
CHART_WINDOWS: tuple[tuple[int, str], ...] = (
    (300, "5 min"),
    (900, "15 min"),
    (3600, "1 h"),
    (6 * 3600, "6 h"),
    (24 * 3600, "24 h"),
    (7 * 24 * 3600, "7 d"),
)


@dataclass(frozen=True)
class BucketRow:
    """What the database says about one bucket (index counted from the window's first bucket)."""

    index: int
    cluster: int
    fallback: int
    none: int
    verification: int
    errors: int
    refused: int
    ttft: tuple[float | None, float | None]
    latency: tuple[float | None, float | None]

    @property
    def total(self) -> int:
        return self.cluster + self.fallback + self.none + self.verification


class Marker(TypedDict):
    ts: float
    kind: str  # breaker_open | breaker_half_open | breaker_closed | fallback
    text: str


class GatewaySeries(TypedDict):
    start: float
    end: float
    step: int
    timestamps: list[float]  # bucket starts, multiples of step
    series: dict[str, list[float | None]]
    totals: dict[str, float | None]
    events: list[Marker]


def auto_step(seconds: float) -> int:
    """A round bucket width giving about ``TARGET_BUCKETS`` buckets over the window."""
    wanted = seconds / TARGET_BUCKETS
    return next((s for s in STEPS if s >= wanted), STEPS[-1])


def first_bucket(start: float, step: int) -> float:
    return float(math.floor(start / step) * step)


def bucket_count(first: float, end: float, step: int) -> int:
    return max(0, math.ceil((end - first) / step))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks: PostgreSQL's ``percentile_cont``."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class _Bucket:
    __slots__ = ("counts", "latency", "ttft")

    def __init__(self) -> None:
        self.counts = [0, 0, 0, 0, 0, 0]  # cluster, fallback, none, verification, errors, refused
        self.ttft: list[float] = []
        self.latency: list[float] = []


# What :func:`aggregate` reads of each record, in this order.
RECORD_FIELDS: tuple[str, ...] = ("created", "backend", "status", "stream", "probe", "ttft_ms", "latency_ms")


def aggregate(
    records: Iterable[tuple[datetime, str, int, bool, bool, float | None, float]], *, first: float, step: int
) -> list[BucketRow]:
    """Per-bucket rows from records (:data:`RECORD_FIELDS`): the SQL's work, in Python."""
    buckets: dict[int, _Bucket] = {}
    for created, backend, status, stream, probe, ttft, latency in records:
        b = buckets.setdefault(int((created.timestamp() - first) // step), _Bucket())
        b.counts[3 if probe else 0 if backend == "cluster" else 1 if backend == "fallback" else 2] += 1
        if status >= 500:
            b.counts[4] += 1
        elif status >= 400:
            b.counts[5] += 1
        else:
            if stream and ttft is not None:
                b.ttft.append(ttft)
            b.latency.append(latency)
    low, high = QUANTILES
    return [
        BucketRow(
            index=index,
            cluster=b.counts[0],
            fallback=b.counts[1],
            none=b.counts[2],
            verification=b.counts[3],
            errors=b.counts[4],
            refused=b.counts[5],
            ttft=(percentile(b.ttft, low), percentile(b.ttft, high)),
            latency=(percentile(b.latency, low), percentile(b.latency, high)),
        )
        for index, b in sorted(buckets.items())
    ]


def build(rows: Iterable[BucketRow], *, first: float, end: float, step: int) -> GatewaySeries:
    """The charts' series over ``[first, end)`` from per-bucket rows (missing buckets: no requests)."""
    count = bucket_count(first, end, step)
    series: dict[str, list[float | None]] = {name: [None] * count for name in SERIES}
    for name in ("rps.cluster", "rps.fallback", "rps.none", "rps.verification"):
        series[name] = [0.0] * count
    total = cluster = fallback = none = verification = errors = refused = 0
    for row in rows:
        if not 0 <= row.index < count or row.total == 0:
            continue
        bucket_start = first + row.index * step
        seconds = max(1.0, min(float(step), end - bucket_start))
        series["rps.cluster"][row.index] = row.cluster / seconds
        series["rps.fallback"][row.index] = row.fallback / seconds
        series["rps.none"][row.index] = row.none / seconds
        series["rps.verification"][row.index] = row.verification / seconds
        series["share.errors"][row.index] = row.errors / row.total
        series["share.refused"][row.index] = row.refused / row.total
        series["ttft.p50"][row.index], series["ttft.p95"][row.index] = row.ttft
        series["latency.p50"][row.index], series["latency.p95"][row.index] = row.latency
        total += row.total
        cluster += row.cluster
        fallback += row.fallback
        none += row.none
        verification += row.verification
        errors += row.errors
        refused += row.refused
    return GatewaySeries(
        start=first,
        end=end,
        step=step,
        timestamps=[first + i * step for i in range(count)],
        series=series,
        totals={
            "requests": float(total),
            "cluster": float(cluster),
            "fallback": float(fallback),
            "verification": float(verification),
            "refused": float(refused),
            "errors": float(errors),
            "error_share": errors / total if total else None,
        },
        events=fallback_marks(series["rps.fallback"], first=first, step=step),
    )


def fallback_marks(fallback_rps: Sequence[float | None], *, first: float, step: int) -> list[Marker]:
    """One mark where each run of buckets with fallback traffic begins."""
    marks: list[Marker] = []
    previous = 0.0
    for i, value in enumerate(fallback_rps):
        current = value or 0.0
        if current > 0 and previous == 0:
            marks.append(
                Marker(ts=first + i * step, kind="fallback", text="requests start going to the fallback")
            )
        previous = current
    return marks


def breaker_marker(ts: float, state: str, reason: str) -> Marker:
    words = {"open": "circuit opened", "half_open": "circuit half-open", "closed": "circuit closed"}
    text = words.get(state, state)
    return Marker(ts=ts, kind=f"breaker_{state}", text=f"{text}: {reason}" if reason else text)
