"""Fit the engine performance model to a topology's own telemetry (PURE: no database, no network).

The model (the same one the what-if simulator runs, ``PerfConfig`` field names):

- one engine step takes ``step_overhead_ms`` + ``prefill_ms_per_token`` × prompt tokens computed in it
  + (when sequences are decoding) ``decode_step_ms`` + ``decode_ms_per_seq`` × running batch;
- a prompt's tokens found in the prefix cache are not computed: uncached tokens = prompt × (1 − hit rate).

What is fitted, per interval of the window (one ``Interval`` per role and collection):

(a) prefill rate: on prefill (or colocated) intervals, the uncached tokens per request
    u = prompt_tps × (1 − hit_rate) / requests_ps and the measured TTFT: the interval's exact mean
    (the histogram's Δsum / Δcount) where telemetry has it, else the p50 read off its buckets. Queueing
    is taken out with an M/D/1 correction (TTFT = S + λS² / (2(1 − λS)), solved for the service time S
    with λ the per-pod request rate), and only low-utilisation intervals are used (ρ = λS < 0.5, less
    than one request waiting per pod). The rate is the median over intervals of (S − overhead) / u.
(b) decode step: every decoding sequence gains one token per step, so the interval's mean TBT is the
    mean step time and the mean decoding batch per pod is tokens/s per pod × step (Little's law); least
    squares of step time on batch gives base (= decode_step_ms + step_overhead_ms) and slope
    (decode_ms_per_seq). Without a TBT mean, the batch is the running gauge (read once, at the
    collection: noisy, and it counts sequences still waiting for their KV) and the step 1000 × b / tokens
    per second.
(c) prefix cache: the hit rate as observed (mean over intervals with prompt traffic).
(d) KV transfer: the links' mean transfer time (``vllm:nixl_xfer_time_seconds`` /
    ``sglang:kv_transfer_latency_ms`` as telemetry stores them, ``link.*.xfer_mean_ms``) against
    bytes moved per transfer: latency ≈ the measured mean minus bytes / nominal bandwidth. Without
    transfers in the window the nominal latency is kept and named as its source.

Errors: predicted vs measured TTFT (prefill and colocated roles) and TBT (decode and
colocated roles) over every interval that has them: median absolute percentage error and R².
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# The nominal model (what the what-if used before calibration): ms, GB/s, bytes.
NOMINAL: dict[str, float] = {
    "prefill_ms_per_token": 0.08,
    "decode_step_ms": 12.0,
    "decode_ms_per_seq": 0.25,
    "step_overhead_ms": 0.5,
    "kv_bandwidth_gbps": 12.5,
    "kv_latency_ms": 2.0,
}

MIN_PREFILL_INTERVALS = 5
MIN_DECODE_INTERVALS = 5
MIN_BATCH_SPREAD = 2.0  # running sequences per pod between the smallest and the largest batch seen
MAX_RHO = 0.5
MAX_MAPE = 0.25  # a fit whose predictions miss by more than this (median) is a poor fit

Verdict = Literal["ok", "not enough data", "poor fit"]


@dataclass(frozen=True)
class Interval:
    """One collection interval of one role (values as telemetry stores them: seconds, per second)."""

    ts: float
    role: str  # prefill | decode | both
    pods: int
    requests_ps: float | None = None
    prompt_tps: float | None = None
    gen_tps: float | None = None
    hit_rate: float | None = None
    running: float | None = None  # summed over the role's pods
    waiting: float | None = None
    ttft_p50: float | None = None  # seconds
    tbt_p50: float | None = None  # seconds
    ttft_mean: float | None = None  # seconds: the interval's exact mean (histogram sum / count)
    tbt_mean: float | None = None  # seconds
    xfer_ms: float | None = None  # mean KV transfer time over the role's links, ms
    xfer_bytes_ps: float | None = None  # KV bytes moved per second over those links


@dataclass
class Fit:
    value: float | None
    intervals: int
    source: str


@dataclass
class Error:
    role: str
    metric: str  # ttft | tbt
    intervals: int
    mape: float | None
    r2: float | None


@dataclass
class Calibration:
    verdict: Verdict
    reasons: list[str]
    fits: dict[str, Fit]
    errors: list[Error]
    intervals: int
    perf: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reasons": self.reasons,
            "intervals": self.intervals,
            "parameters": {
                name: {"value": fit.value, "intervals": fit.intervals, "basis": fit.source}
                for name, fit in self.fits.items()
            },
            "fit_errors": [vars(error) for error in self.errors],
            "perf": self.perf,
        }


def _ok(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def ttft_ms(interval: Interval) -> float | None:
    """The interval's TTFT: its exact mean where telemetry has it (the M/D/1 formula is for the mean), else
    the p50 read off the histogram's buckets."""
    value = interval.ttft_mean if _ok(interval.ttft_mean) else interval.ttft_p50
    return float(value) * 1000.0 if _ok(value) else None  # type: ignore[arg-type]


def tbt_ms(interval: Interval) -> float | None:
    value = interval.tbt_mean if _ok(interval.tbt_mean) else interval.tbt_p50
    return float(value) * 1000.0 if _ok(value) else None  # type: ignore[arg-type]


def uncached_tokens(interval: Interval) -> float | None:
    """Prompt tokens computed per request (after the prefix cache)."""
    if not (_ok(interval.prompt_tps) and _ok(interval.requests_ps)) or not interval.requests_ps:
        return None
    hit = interval.hit_rate if _ok(interval.hit_rate) else 0.0
    return float(interval.prompt_tps) * (1.0 - float(hit)) / float(interval.requests_ps)  # type: ignore[arg-type]


def _rho(interval: Interval, service_ms: float) -> float:
    per_pod = float(interval.requests_ps or 0.0) / max(1, interval.pods)
    return per_pod * service_ms / 1000.0


def _low_load(interval: Interval) -> bool:
    return (interval.waiting or 0.0) / max(1, interval.pods) < 1.0


def fit_prefill(intervals: Sequence[Interval], overhead_ms: float) -> Fit:
    """(a): ms per uncached prompt token, M/D/1-corrected, on low-utilisation intervals."""
    usable = [
        (iv, u, ttft)
        for iv in intervals
        if iv.role in ("prefill", "both") and _low_load(iv)
        for u, ttft in [(uncached_tokens(iv), ttft_ms(iv))]
        if u is not None and u >= 1.0 and ttft is not None
    ]
    if not usable:
        return Fit(None, 0, "no prefill interval with requests, prompt tokens and TTFT")
    kept = []
    for iv, u, ttft in usable:
        service = md1_service_ms(ttft, float(iv.requests_ps or 0.0) / max(1, iv.pods))
        if _rho(iv, service) < MAX_RHO:
            kept.append(max(0.0, (service - overhead_ms) / u))
    if not kept:
        return Fit(None, 0, f"every prefill interval was above {MAX_RHO:.0%} utilisation")
    rate = statistics.median(kept)
    return Fit(rate, len(kept), "TTFT per uncached prompt token, M/D/1-corrected, utilisation < 50 %")


def md1_service_ms(ttft_ms: float, per_pod_rps: float) -> float:
    """The service time S whose M/D/1 response time S + λS² / (2(1 − λS)) is ``ttft_ms``."""
    lam = per_pod_rps / 1000.0  # per ms
    if lam <= 0:
        return ttft_ms
    b = 2.0 + 2.0 * ttft_ms * lam
    return (b - math.sqrt(max(0.0, b * b - 8.0 * lam * ttft_ms))) / (2.0 * lam)


def decode_point(iv: Interval) -> tuple[float, float] | None:
    """(decoding batch per pod, step ms) of a decode or colocated interval. Every decoding sequence gains
    one token per step, so where the engine's TBT histogram gives the interval's exact mean, that mean is
    the step and the mean batch is tokens/s × step (Little's law); otherwise the running gauge, read once
    at the collection, is the batch and the step is batch / tokens per second."""
    if iv.role not in ("decode", "both") or not _ok(iv.gen_tps) or not iv.gen_tps:
        return None
    tps = float(iv.gen_tps) / max(1, iv.pods)
    if _ok(iv.tbt_mean) and iv.tbt_mean:
        step = float(iv.tbt_mean) * 1000.0
        batch = tps * step / 1000.0
    elif _ok(iv.running):
        batch = float(iv.running) / max(1, iv.pods)  # type: ignore[arg-type]
        step = 1000.0 * batch / tps
    else:
        return None
    return (batch, step) if batch >= 1.0 else None


def decode_points(intervals: Sequence[Interval]) -> list[tuple[float, float]]:
    """(decoding batch per pod, measured step ms) of decode and colocated intervals."""
    return [point for iv in intervals for point in [decode_point(iv)] if point is not None]


def least_squares(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """(intercept, slope) of y on x, or None when x does not vary."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def mape_r2(pairs: Sequence[tuple[float, float]]) -> tuple[float | None, float | None]:
    """(median |pred − meas| / meas, R²) over (predicted, measured) pairs."""
    pairs = [(p, m) for p, m in pairs if m > 0]
    if not pairs:
        return None, None
    mape = statistics.median(abs(p - m) / m for p, m in pairs)
    mean = sum(m for _, m in pairs) / len(pairs)
    total = sum((m - mean) ** 2 for _, m in pairs)
    resid = sum((m - p) ** 2 for p, m in pairs)
    r2 = 1.0 - resid / total if total > 0 else None
    return mape, r2


def _kv_fit(intervals: Sequence[Interval]) -> Fit:
    times = [float(iv.xfer_ms) for iv in intervals if _ok(iv.xfer_ms) and iv.role == "decode"]  # type: ignore[arg-type]
    if not times:
        return Fit(NOMINAL["kv_latency_ms"], 0, "nominal: no KV transfer was reported in the window")
    return Fit(statistics.median(times), len(times), "links' measured mean transfer time (engine histograms)")


def calibrate(intervals: Sequence[Interval]) -> Calibration:
    """Fit (a)–(d), measure the fit's error and give a verdict."""
    overhead = NOMINAL["step_overhead_ms"]
    reasons: list[str] = []
    prefill = fit_prefill(intervals, overhead)
    points = decode_points(intervals)
    line = least_squares(points)
    spread = max((x for x, _ in points), default=0.0) - min((x for x, _ in points), default=0.0)
    base = slope = None
    if line is not None and spread >= MIN_BATCH_SPREAD:
        base, slope = line
    step = Fit(None if base is None else base - overhead, len(points), "least squares of step time on batch")
    per_seq = Fit(slope, len(points), "least squares of step time on batch")
    hits = [float(iv.hit_rate) for iv in intervals if iv.role in ("prefill", "both") and _ok(iv.hit_rate)]  # type: ignore[arg-type]
    hit = Fit(statistics.fmean(hits) if hits else None, len(hits), "prefix-cache hit rate as observed")
    kv = _kv_fit(intervals)
    fits = {
        "prefill_ms_per_token": prefill,
        "decode_step_ms": step,
        "decode_ms_per_seq": per_seq,
        "step_overhead_ms": Fit(overhead, 0, "nominal: not separable from the step base"),
        "hit_rate": hit,
        "kv_latency_ms": kv,
    }
    if prefill.intervals < MIN_PREFILL_INTERVALS:
        reasons.append(
            f"only {prefill.intervals} low-utilisation intervals with prefill load; need "
            f"{MIN_PREFILL_INTERVALS}: run the verification probes' concurrency load for 2 minutes"
        )
    if len(points) < MIN_DECODE_INTERVALS:
        reasons.append(
            f"only {len(points)} intervals with decode load; need {MIN_DECODE_INTERVALS}: "
            "run the verification probes' concurrency load for 2 minutes"
        )
    elif base is None:
        reasons.append(
            f"the running batch varied by {spread:.1f} sequences per pod; need {MIN_BATCH_SPREAD:.0f}: "
            "run load at two concurrencies (e.g. 2 and 16) for a minute each"
        )
    errors = _errors(intervals, prefill.value, base, slope, overhead)
    verdict: Verdict = "not enough data" if reasons else "ok"
    if verdict == "ok":
        for error in errors:
            if error.mape is not None and error.mape > MAX_MAPE:
                verdict = "poor fit"
                reasons.append(
                    f"{error.role} {error.metric.upper()} predicted within a median {error.mape:.0%} of "
                    f"measured (limit {MAX_MAPE:.0%}): the load changed within the window, or the engine "
                    "does not follow the model; calibrate on a steady window"
                )
    perf: dict[str, Any] = {}
    if verdict == "ok":
        perf = {
            "prefill_ms_per_token": round(float(prefill.value), 6),  # type: ignore[arg-type]
            "decode_step_ms": round(max(0.0, float(step.value)), 4),  # type: ignore[arg-type]
            "decode_ms_per_seq": round(max(0.0, float(slope)), 5),  # type: ignore[arg-type]
            "step_overhead_ms": overhead,
            "kv_latency_ms": round(float(kv.value), 4),  # type: ignore[arg-type]
        }
    return Calibration(verdict, reasons, fits, errors, len(intervals), perf)


def _errors(
    intervals: Sequence[Interval],
    rate: float | None,
    base: float | None,
    slope: float | None,
    overhead: float,
) -> list[Error]:
    ttft: dict[str, list[tuple[float, float]]] = {}
    tbt: dict[str, list[tuple[float, float]]] = {}
    for iv in intervals:
        u, measured = uncached_tokens(iv), ttft_ms(iv)
        if rate is not None and iv.role in ("prefill", "both") and u is not None and measured is not None:
            service = overhead + rate * u
            rho = min(0.95, _rho(iv, service))
            predicted = service + rho * service / (2.0 * (1.0 - rho))
            ttft.setdefault(iv.role, []).append((predicted, measured))
        point = decode_point(iv)
        # against the TBT mean the fit's residual; against a p50 (no mean) an independent check
        measured = tbt_ms(iv)
        if base is not None and slope is not None and point is not None and measured is not None:
            tbt.setdefault(iv.role, []).append((base + slope * point[0], measured))
    out = []
    for metric, table in (("ttft", ttft), ("tbt", tbt)):
        for role, pairs in sorted(table.items()):
            mape, r2 = mape_r2(pairs)
            out.append(Error(role, metric, len(pairs), mape, r2))
    return out
