"""``python -m perfmodel.sim``: replay traffic for several splits on the virtual clock (JSON in, JSON out).

stdin: {"buckets": [{start, seconds, rate, prompt_len, output_len}] with "prefix_hit_rate", or
        "trace": [[at_s, prompt, output, group], ...] with "prefix_tokens"; "splits": [[p, d], ...],
        "ttft_ms", "tbt_ms", "scales": [0.5, 1, 1.5, 2], "perf": {PerfConfig fields}}
stdout: {"splits": [{prefill, decode, attainment, ttft_attainment, tbt_attainment, goodput_rps, failed}]}

Buckets are Poisson arrivals at each bucket's rate (a scale multiplies the rate); a trace is replayed as
recorded (a scale compresses its arrival times).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from perfmodel.model.config import PerfConfig
from perfmodel.sim.cluster import run_trace
from perfmodel.sim.evaluate import Bucket, attainment, goodput, trace_from_buckets, trace_from_rows
from perfmodel.sim.types import SimRequest


def _traffic(request: dict[str, Any]) -> tuple[Callable[[float], list[SimRequest]], float]:
    """The traffic at a scale, and its base rate in requests per second."""
    if request.get("trace") is not None:
        rows = [list(r) for r in request["trace"]]
        prefix_tokens = int(request.get("prefix_tokens") or 0)
        span = max((float(r[0]) for r in rows), default=0.0) or 1.0
        return (lambda scale: trace_from_rows(rows, scale, prefix_tokens)), len(rows) / span
    buckets = [Bucket(**b) for b in request["buckets"]]
    span = sum(b.seconds for b in buckets) or 1.0
    hit_rate = float(request.get("prefix_hit_rate") or 0.0)
    rate = sum(b.rate * b.seconds for b in buckets) / span
    return (lambda scale: trace_from_buckets(buckets, scale, hit_rate=hit_rate)), rate


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    known = {f.name for f in fields(PerfConfig)}
    cfg = PerfConfig(**{k: v for k, v in (request.get("perf") or {}).items() if k in known})
    ttft_ms, tbt_ms = float(request["ttft_ms"]), float(request["tbt_ms"])
    scales = [float(s) for s in request.get("scales") or [1.0]]
    traffic, base_rate = _traffic(request)
    out = []
    for prefill, decode in request["splits"]:
        cluster = run_trace(traffic(1.0), prefill, decode, cfg=cfg)
        result = attainment(cluster.outcomes, ttft_ms, tbt_ms)

        def at(scale: float, p: int = prefill, d: int = decode) -> Any:
            return run_trace(traffic(scale), p, d, cfg=cfg)

        best, _ = goodput(at, scales, ttft_ms, tbt_ms)
        out.append(
            {
                "prefill": prefill,
                "decode": decode,
                "attainment": result.both,
                "ttft_attainment": result.ttft,
                "tbt_attainment": result.tbt,
                "goodput_rps": best * base_rate,
                "failed": result.failed,
            }
        )
    return {"splits": out}


def main() -> None:
    json.dump(evaluate(json.load(sys.stdin)), sys.stdout)


if __name__ == "__main__":
    main()
