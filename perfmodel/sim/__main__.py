"""``python -m perfmodel.sim``: replay traffic for several splits on the virtual clock (JSON in, JSON out).

stdin: {"buckets": [{start, seconds, rate, prompt_len, output_len}], "splits": [[p, d], ...],
        "ttft_ms", "tbt_ms", "scales": [0.5, 1, 1.5, 2], "perf": {PerfConfig fields}}
stdout: {"splits": [{prefill, decode, attainment, ttft_attainment, tbt_attainment, goodput_rps, failed}]}
"""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from typing import Any

from perfmodel.model.config import PerfConfig
from perfmodel.sim.cluster import run_trace
from perfmodel.sim.evaluate import Bucket, attainment, goodput, trace_from_buckets


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    buckets = [Bucket(**b) for b in request["buckets"]]
    known = {f.name for f in fields(PerfConfig)}
    cfg = PerfConfig(**{k: v for k, v in (request.get("perf") or {}).items() if k in known})
    ttft_ms, tbt_ms = float(request["ttft_ms"]), float(request["tbt_ms"])
    scales = [float(s) for s in request.get("scales") or [1.0]]
    span = sum(b.seconds for b in buckets) or 1.0
    base_rate = sum(b.rate * b.seconds for b in buckets) / span
    out = []
    for prefill, decode in request["splits"]:
        trace = trace_from_buckets(buckets)
        cluster = run_trace(trace, prefill, decode, cfg=cfg)
        result = attainment(cluster.outcomes, ttft_ms, tbt_ms)

        def at(scale: float, p: int = prefill, d: int = decode) -> Any:
            return run_trace(trace_from_buckets(buckets, scale), p, d, cfg=cfg)

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
