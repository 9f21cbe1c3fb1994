"""SLO attainment and goodput (DistServe's definition: the highest request rate at which at least 90 % of
requests meet both the TTFT and the TBT target), and traces built from per-interval traffic."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perfmodel.sim.cluster import SimCluster
from perfmodel.sim.types import Outcome, SimRequest


@dataclass(frozen=True)
class Attainment:
    both: float
    ttft: float
    tbt: float
    failed: int
    count: int


def attainment(outcomes: Sequence[Outcome], ttft_ms: float, tbt_ms: float) -> Attainment:
    """Shares of ALL requests (a failed one meets nothing) meeting TTFT, TBT and both."""
    if not outcomes:
        return Attainment(0.0, 0.0, 0.0, 0, 0)
    ttft_ok = [o.ok and o.ttft is not None and o.ttft * 1000 <= ttft_ms for o in outcomes]
    tbt_ok = [o.ok and (o.tbt is None or o.tbt * 1000 <= tbt_ms) for o in outcomes]
    both = sum(1 for a, b in zip(ttft_ok, tbt_ok, strict=True) if a and b)
    n = len(outcomes)
    return Attainment(both / n, sum(ttft_ok) / n, sum(tbt_ok) / n, sum(1 for o in outcomes if not o.ok), n)


def goodput(
    run: Callable[[float], SimCluster],
    rates: Sequence[float],
    ttft_ms: float,
    tbt_ms: float,
    threshold: float = 0.9,
) -> tuple[float, dict[float, Attainment]]:
    """The highest rate (scanned upwards, stopping at the first miss) with attainment ≥ threshold."""
    best = 0.0
    seen: dict[float, Attainment] = {}
    for rate in sorted(rates):
        cluster = run(rate)
        result = attainment(cluster.outcomes, ttft_ms, tbt_ms)
        seen[rate] = result
        if result.both >= threshold:
            best = rate
        else:
            break
    return best, seen


@dataclass(frozen=True)
class Bucket:
    start: float  # seconds from the trace start
    seconds: float
    rate: float  # requests per second
    prompt_len: int
    output_len: int


def trace_from_buckets(
    buckets: Sequence[Bucket], scale: float = 1.0, seed: int = 7, hit_rate: float = 0.0
) -> list[SimRequest]:
    """Poisson arrivals at each bucket's rate (× scale) with its mean prompt and output lengths; with
    ``hit_rate`` every prompt starts with a shared prefix of that share of its tokens, so the prefix cache
    finds about that share of the prompt tokens (a calibration's observed hit rate)."""
    rng = random.Random(seed)
    out: list[SimRequest] = []
    for bucket in buckets:
        rate = bucket.rate * scale
        if rate <= 0:
            continue
        t = bucket.start + rng.expovariate(rate)
        while t < bucket.start + bucket.seconds:
            prompt_len = max(1, bucket.prompt_len)
            shared = round(prompt_len * min(1.0, max(0.0, hit_rate)))
            out.append(
                SimRequest(
                    at=t,
                    prompt_len=prompt_len,
                    output_len=max(1, bucket.output_len),
                    prefix=0 if shared else -1,
                    prefix_len=shared,
                )
            )
            t += rng.expovariate(rate)
    return out


def trace_from_rows(
    rows: Sequence[Sequence[float]], scale: float = 1.0, prefix_tokens: int = 0
) -> list[SimRequest]:
    """A recorded trace replayed as it came: rows of ``[arrival seconds, prompt tokens, output tokens,
    prefix group]`` (group -1: none). Requests of one group share their first ``prefix_tokens`` tokens (at
    most their whole prompt), so the prefix cache reuses them; ``scale`` k replays the same requests at k
    times the rate (arrivals k times closer together)."""
    out = []
    for at, prompt, output, group in rows:
        prompt_len, prefix = max(1, int(prompt)), int(group)
        out.append(
            SimRequest(
                at=float(at) / scale,
                prompt_len=prompt_len,
                output_len=max(1, int(output)),
                prefix=prefix,
                prefix_len=min(prompt_len, prefix_tokens) if prefix >= 0 else 0,
            )
        )
    return out
