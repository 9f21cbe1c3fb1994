"""The what-if: replay a topology's recorded traffic for every split its budget allows.

The recorded traffic is the telemetry Tandem stores per minute (``topology.requests_ps``,
``topology.prompt_tps``, ``topology.gen_tps``): each minute becomes a bucket of Poisson arrivals at
that rate with that minute's mean prompt and output lengths. The replay runs in the sandbox's
virtual-clock simulator (the sandbox's own engine performance model), in a child process
(``python -m sandbox.sim``, JSON in and out), so the product does not import the sandbox.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from controlplane.api.errors import DomainError
from rebalancing.policy import Limits, split_problem
from rebalancing.selectors import role_replicas, topology_limits

MAX_REQUESTS = 3000
SCALES = (0.5, 1.0, 1.5, 2.0)
TIMEOUT_SECONDS = 300


def splits_for(limits: Limits) -> list[tuple[int, int]]:
    """Every split using as much of the budget as the bounds allow (smaller ones are dominated)."""
    out = []
    for prefill in range(max(1, limits.prefill_min), limits.prefill_max + 1):
        room = limits.budget - prefill * limits.prefill_accelerators
        decode = min(limits.decode_max, room // max(1, limits.decode_accelerators))
        if decode >= max(1, limits.decode_min) and not split_problem(limits, prefill, decode):
            out.append((prefill, decode))
    return out


def buckets_from_history(history: dict[str, Any]) -> list[dict[str, Any]]:
    series = history["series"]
    step = float(history["step"])
    start = float(history["start"])
    out = []
    for index, ts in enumerate(history["timestamps"]):
        rate = series.get("topology.requests_ps", [None] * (index + 1))[index]
        prompt = series.get("topology.prompt_tps", [None] * (index + 1))[index]
        gen = series.get("topology.gen_tps", [None] * (index + 1))[index]
        if not rate or rate <= 0:
            continue
        out.append(
            {
                "start": max(0.0, float(ts) - start),
                "seconds": step,
                "rate": float(rate),
                "prompt_len": max(1, round((prompt or 0) / rate)),
                "output_len": max(1, round((gen or 0) / rate)),
            }
        )
    return out


def _trim(buckets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the latest buckets holding at most MAX_REQUESTS requests, re-based to start at 0."""
    kept: list[dict[str, Any]] = []
    total = 0.0
    for bucket in reversed(buckets):
        total += bucket["rate"] * bucket["seconds"]
        if total > MAX_REQUESTS and kept:
            break
        kept.append(bucket)
    kept.reverse()
    if kept:
        offset = kept[0]["start"]
        kept = [{**b, "start": b["start"] - offset} for b in kept]
    return kept


def run_simulator(request: dict[str, Any]) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sandbox.sim"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DomainError(
            f"the simulation took longer than {TIMEOUT_SECONDS} s",
            code="whatif_timeout",
            fields={"window_seconds": ["choose a shorter window"]},
            status_code=503,
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DomainError(f"the simulator failed: {last}", code="whatif_failed", status_code=503)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def topology_whatif(*, topology: Any, window_seconds: int, end: float | None = None) -> dict[str, Any]:
    from telemetry.selectors import history

    end = time.time() if end is None else end
    start = end - window_seconds
    names = ["topology.requests_ps", "topology.prompt_tps", "topology.gen_tps"]
    recorded = history(topology_id=topology.pk, names=names, start=start, end=end, step=60)
    buckets = _trim(buckets_from_history(dict(recorded)))
    if not buckets:
        raise DomainError(
            "no recorded traffic in this window",
            code="no_traffic",
            fields={"window_seconds": ["choose a window in which the topology served requests"]},
        )
    limits = topology_limits(topology)
    splits = splits_for(limits)
    if not splits:
        raise DomainError(
            "the budget and bounds allow no split",
            code="no_split",
            fields={"topology": ["raise rebalancing.accelerator_budget or widen the bounds"]},
        )
    answer = run_simulator(
        {
            "buckets": buckets,
            "splits": [list(s) for s in splits],
            "ttft_ms": topology.slo_ttft_ms,
            "tbt_ms": topology.slo_tbt_ms,
            "scales": list(SCALES),
        }
    )
    rows = answer["splits"]
    best = max(rows, key=lambda r: (r["attainment"], r["goodput_rps"])) if rows else None
    prefill, decode = role_replicas(topology.spec)
    requests = round(sum(b["rate"] * b["seconds"] for b in buckets))
    return {
        "start": start,
        "end": end,
        "requests": requests,
        "splits": rows,
        "recommended": best,
        "current": {"prefill": prefill, "decode": decode},
        "note": (
            f"{requests} requests replayed from {len(buckets)} recorded minutes on the sandbox's engine "
            "performance model (virtual clock); goodput = highest rate (0.5×–2× the recorded one) at which "
            "≥ 90 % of requests meet both TTFT and TBT targets"
        ),
    }
