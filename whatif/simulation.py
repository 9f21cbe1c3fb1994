"""The what-if: replay a topology's recorded traffic for every split its budget allows.

Per-request traces (the gateway's records, an imported file) are replayed as recorded
(``whatif/tracereplay.py``, chosen by ``whatif/plan.py``); without enough of them the recorded traffic is
the telemetry Tandem stores per minute (``topology.requests_ps``,
``topology.prompt_tps``, ``topology.gen_tps``): each minute becomes a bucket of Poisson arrivals at
that rate with that minute's mean prompt and output lengths. The replay runs in the product's
virtual-clock simulator (``perfmodel.sim`` on the engine performance model ``perfmodel.model``, which the
sandbox's engines also run), in a child process (``python -m perfmodel.sim``, JSON in and out) so that a
runaway replay can be stopped; it needs nothing from the sandbox.

The replay runs as a background job (``whatif.tasks``), one split per child process so that a cancel is
noticed between splits; its work stays bounded (docs/whatif.md): the window ends at most
``MAX_FUTURE_SECONDS`` after now and no earlier than the rollups' retention, spans 60 s to one day, and only
the latest recorded minutes whose estimated simulator time fits ``WORK_BUDGET_SECONDS`` are replayed;
``TIMEOUT_SECONDS`` stops one split's replay that runs over anyway.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from controlplane.api.errors import DomainError
from rebalancing.policy import Limits, split_problem

MAX_REQUESTS = 3000
SCALES = (0.5, 1.0, 1.5, 2.0)
MAX_WINDOW_SECONDS = 24 * 3600
MAX_FUTURE_SECONDS = 300  # clock skew between the caller and the server; later ends have no traffic yet
OLDEST_END_SECONDS = 30 * 24 * 3600  # the rollups' retention (telemetry.services.ROLLUP_RETENTION)
MAX_OUTPUT_LEN = 4096  # a recorded minute's mean answer length beyond this is replayed as this
# The simulator's cost, measured on the 2-core CI machine (perfmodel.sim, one split, 200 requests): about
# 0.4 ms per request, 0.032 ms per generated token, 0.0001 ms per prompt token. Each split runs once at the
# recorded rate and once per goodput scale (a run at scale k replays k times the requests).
REQUEST_COST_SECONDS = 0.0004
OUTPUT_TOKEN_COST_SECONDS = 0.000032
PROMPT_TOKEN_COST_SECONDS = 0.0000001
RUNS_PER_SPLIT = 1.0 + sum(SCALES)
WORK_BUDGET_SECONDS = 3.0
TIMEOUT_SECONDS = 8  # per split


def splits_for(limits: Limits) -> list[tuple[int, int]]:
    """Every split using as much of the budget as the bounds allow (smaller ones are dominated)."""
    out = []
    for prefill in range(max(1, limits.prefill_min), limits.prefill_max + 1):
        room = limits.budget - prefill * limits.prefill_accelerators
        decode = min(limits.decode_max, room // max(1, limits.decode_accelerators))
        if decode >= max(1, limits.decode_min) and not split_problem(limits, prefill, decode):
            out.append((prefill, decode))
    return out


def window_problem(*, end: float, now: float) -> str | None:
    """Why a what-if window ending at ``end`` cannot be replayed (None: it can)."""
    if not math.isfinite(end):
        return "give a Unix time in seconds, e.g. the current time"
    if end > now + MAX_FUTURE_SECONDS:
        return (
            f"the window may end at most {MAX_FUTURE_SECONDS} s after now ({now:.0f}); "
            "omit end to replay the latest traffic"
        )
    if end < now - OLDEST_END_SECONDS:
        return f"the window must end within the last {OLDEST_END_SECONDS // 86400} days (telemetry retention)"
    return None


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
                "output_len": min(MAX_OUTPUT_LEN, max(1, round((gen or 0) / rate))),
            }
        )
    return out


def request_seconds(prompt_len: float, output_len: float) -> float:
    """Estimated simulator time of one request (see the cost constants above)."""
    return (
        REQUEST_COST_SECONDS + output_len * OUTPUT_TOKEN_COST_SECONDS + prompt_len * PROMPT_TOKEN_COST_SECONDS
    )


def replay_seconds(bucket: dict[str, Any], runs: float) -> float:
    """Estimated simulator time to replay ``bucket`` ``runs`` times."""
    per_request = request_seconds(bucket["prompt_len"], bucket["output_len"])
    return float(bucket["rate"] * bucket["seconds"] * per_request * runs)


def trim(
    buckets: list[dict[str, Any]], *, splits: int, budget_seconds: float = WORK_BUDGET_SECONDS
) -> list[dict[str, Any]]:
    """The latest buckets whose replay for ``splits`` splits fits the work budget and MAX_REQUESTS, re-based
    to start at 0. A bucket that does not fit whole is cut to its latest seconds that do, so a burst of
    traffic cannot make the replay unbounded; empty when not even one request fits."""
    runs = max(1, splits) * RUNS_PER_SPLIT
    kept: list[dict[str, Any]] = []
    spent = 0.0
    requests = 0.0
    for bucket in reversed(buckets):
        cost = replay_seconds(bucket, runs)
        count = bucket["rate"] * bucket["seconds"]
        fraction = min(
            1.0,
            (budget_seconds - spent) / cost if cost > 0 else 1.0,
            (MAX_REQUESTS - requests) / count if count > 0 else 1.0,
        )
        if fraction >= 1.0:
            kept.append(bucket)
            spent += cost
            requests += count
            continue
        seconds = bucket["seconds"] * max(0.0, fraction)
        if kept and seconds * bucket["rate"] < 1.0:
            break  # not one more request fits
        if seconds * bucket["rate"] < 1.0:
            break  # not even one request fits: nothing is kept
        kept.append({**bucket, "start": bucket["start"] + bucket["seconds"] - seconds, "seconds": seconds})
        break
    kept.reverse()
    if kept:
        offset = kept[0]["start"]
        kept = [{**b, "start": b["start"] - offset} for b in kept]
    return kept


SIMULATOR = (sys.executable, "-m", "perfmodel.sim")  # the child process; JSON on stdin and stdout


def run_simulator(request: dict[str, Any], command: tuple[str, ...] = SIMULATOR) -> dict[str, Any]:
    try:
        done = subprocess.run(
            list(command),
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
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DomainError(f"the simulator failed: {last}", code="whatif_failed")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def window_fields(*, window_seconds: int, end: float, now: float) -> dict[str, list[str]]:
    """Field errors of a what-if window (empty: it can be replayed)."""
    fields: dict[str, list[str]] = {}
    problem = window_problem(end=end, now=now)
    if problem:
        fields["end"] = [problem]
    if not 60 <= window_seconds <= MAX_WINDOW_SECONDS:
        fields["window_seconds"] = [f"give 60 to {MAX_WINDOW_SECONDS} seconds"]
    return fields


def splits_fields(chosen: list[tuple[int, int]], allowed: list[tuple[int, int]]) -> dict[str, list[str]]:
    """Field errors of the splits a person chose to consider (empty: all are among the allowed ones)."""
    if not allowed:
        return {"splits": ["the budget and bounds allow no split: raise rebalancing.accelerator_budget"]}
    names = ", ".join(f"{p}P/{d}D" for p, d in allowed)
    outside = [f"{p}P/{d}D" for p, d in chosen if (p, d) not in allowed]
    if outside:
        return {"splits": [f"{', '.join(outside)} not within the budget and bounds; choose among {names}"]}
    return {}


SOURCES = {
    "gateway": "the gateway's per-request records",
    "imported": "an imported trace file",
    "rollups": "per-minute telemetry",
}


def too_large(splits: int) -> DomainError:
    return DomainError(
        f"replaying even one recorded request for {splits} splits exceeds the what-if's work budget",
        code="whatif_too_large",
        fields={"splits": ["consider fewer splits, or narrow rebalancing's prefill and decode bounds"]},
    )


@dataclass(frozen=True)
class Replay:
    """What one what-if run replays: the trimmed buckets (per-minute means) or trace (per-request rows
    ``[arrival s, prompt, output, prefix group]``), the splits, the targets and what it covers."""

    buckets: list[dict[str, Any]]
    splits: list[tuple[int, int]]
    ttft_ms: float
    tbt_ms: float
    note: str
    requests: int
    source: str = "rollups"  # a key of SOURCES
    recorded: int = 0  # requests the source held for the window (before the work bounds)
    trace: list[list[float]] | None = None
    prefix_tokens: int = 0  # a prefix group's shared leading tokens (trace replays)
    perf: dict[str, float] = field(default_factory=dict)  # PerfConfig fields; empty: the nominal model
    prefix_hit_rate: float = 0.0  # buckets only: the share of each prompt found in the prefix cache


def replay_plan(
    *, recorded: dict[str, Any], splits: list[tuple[int, int]], ttft_ms: float, tbt_ms: float
) -> Replay:
    """The replay of the recorded history for ``splits`` within the work budget (pure)."""
    recorded_buckets = buckets_from_history(recorded)
    if not recorded_buckets:
        raise DomainError(
            "no recorded traffic in this window",
            code="no_traffic",
            fields={"window_seconds": ["choose a window in which the topology served requests"]},
        )
    buckets = trim(recorded_buckets, splits=len(splits))
    if not buckets:
        raise too_large(len(splits))
    requests = round(sum(b["rate"] * b["seconds"] for b in buckets))
    held = round(sum(b["rate"] * b["seconds"] for b in recorded_buckets))
    replayed = sum(b["seconds"] for b in buckets)
    whole = len(buckets) == len(recorded_buckets) and replayed >= sum(b["seconds"] for b in recorded_buckets)
    scope = (
        f"{len(buckets)} recorded minutes"
        if whole
        else f"the latest {replayed:.0f} s of {len(recorded_buckets)} recorded minutes (the replay budget)"
    )
    note = f"{requests} requests (Poisson arrivals at each minute's mean rate and lengths) from {scope}"
    return Replay(buckets, splits, ttft_ms, tbt_ms, note, requests, source="rollups", recorded=held)


def simulator_request(replay: Replay, split: tuple[int, int]) -> dict[str, Any]:
    """What the simulator child reads on stdin to replay ``split``."""
    traffic: dict[str, Any] = (
        {"trace": replay.trace, "prefix_tokens": replay.prefix_tokens}
        if replay.trace is not None
        else {"buckets": replay.buckets, "prefix_hit_rate": replay.prefix_hit_rate}
    )
    return {
        **traffic,
        "splits": [list(split)],
        "ttft_ms": replay.ttft_ms,
        "tbt_ms": replay.tbt_ms,
        "scales": list(SCALES),
        **({"perf": replay.perf} if replay.perf else {}),
    }


def replay_split(replay: Replay, split: tuple[int, int]) -> dict[str, Any]:
    """One split's row (attainment, goodput, failed) from the simulator."""
    answer = run_simulator(simulator_request(replay, split))
    row: dict[str, Any] = answer["splits"][0]
    return row


def recommended(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The split with the best SLO attainment, goodput breaking ties."""
    return max(rows, key=lambda r: (r["attainment"], r["goodput_rps"])) if rows else None
