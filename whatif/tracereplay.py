"""The what-if's traffic as a trace: per-request records replayed as they came (pure).

The source is the gateway's per-request records of the window (arrival, prompt and output tokens, prefix
group; ``gateway.models.GatewayRequest``) when there are enough of them, or a trace file a person imported
(``workload.tracefile``: Tandem's JSONL, Mooncake's JSONL, Azure's CSV). Each request keeps its arrival time
and lengths; requests of one prefix group share their first ``SHARED_PREFIX_TOKENS`` tokens in the
simulator's prefix cache (the gateway names a group by its leading 2,000 characters, about 500 tokens;
Mooncake by its first 512-token block). The work bounds are the per-minute replay's: the latest requests
whose estimated simulator time fits ``WORK_BUDGET_SECONDS``, and at most ``MAX_REQUESTS``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controlplane.api.errors import DomainError
from whatif.simulation import (
    MAX_OUTPUT_LEN,
    MAX_REQUESTS,
    SCALES,
    SOURCES,
    WORK_BUDGET_SECONDS,
    Replay,
    request_seconds,
    too_large,
)
from workload.tracefile import TraceError, TraceRequest, parse

SHARED_PREFIX_TOKENS = 512
MAX_PROMPT_LEN = 32768  # a longer prompt is replayed as this (the nominal model holds 131,072 KV tokens)
MIN_TRACE_REQUESTS = 20  # fewer gateway records than this: the per-minute means are replayed instead
MIN_COVERAGE = 0.5  # nor when the gateway saw less than half the requests the engines counted
RUNS_PER_SPLIT = 1 + len(SCALES)  # a trace at scale k is the same requests, k times closer together


def gateway_enough(records: int, counted: float) -> bool:
    """Whether ``records`` gateway records stand for a window in which the engines counted ``counted``
    requests (0: no per-minute telemetry to compare with)."""
    return records >= MIN_TRACE_REQUESTS and (counted <= 0 or records >= MIN_COVERAGE * counted)


def rows(requests: Sequence[TraceRequest]) -> list[list[float]]:
    """``[arrival s from the first, prompt, output, group]`` per request in arrival order; a group is an
    index per distinct prefix group, -1 for none. Lengths are capped as the per-minute replay caps them."""
    ordered = sorted(requests, key=lambda r: r.arrival_ms)
    groups: dict[str, int] = {}
    first = ordered[0].arrival_ms if ordered else 0
    out: list[list[float]] = []
    for r in ordered:
        group = groups.setdefault(r.prefix_group, len(groups)) if r.prefix_group else -1
        prompt = min(MAX_PROMPT_LEN, max(1, r.prompt_tokens))
        output = min(MAX_OUTPUT_LEN, max(1, r.output_tokens))
        out.append([(r.arrival_ms - first) / 1000, prompt, output, group])
    return out


def trim(
    found: list[list[float]], *, splits: int, budget_seconds: float = WORK_BUDGET_SECONDS
) -> list[list[float]]:
    """The latest rows whose replay for ``splits`` splits fits the work budget and MAX_REQUESTS, re-based to
    start at 0; empty when not even one fits."""
    runs = max(1, splits) * RUNS_PER_SPLIT
    spent = 0.0
    start = len(found)
    while start > 0 and len(found) - start < MAX_REQUESTS:
        cost = request_seconds(found[start - 1][1], found[start - 1][2]) * runs
        if spent + cost > budget_seconds:
            break
        spent += cost
        start -= 1
    kept = found[start:]
    offset = kept[0][0] if kept else 0.0
    return [[at - offset, prompt, output, group] for at, prompt, output, group in kept]


def trace_plan(
    *,
    requests: Sequence[TraceRequest],
    source: str,
    recorded: int,
    splits: list[tuple[int, int]],
    ttft_ms: float,
    tbt_ms: float,
) -> Replay:
    """The replay of ``requests`` (``recorded`` of them in the source) for ``splits`` within the work
    bounds."""
    every = rows(requests)
    kept = trim(every, splits=len(splits))
    if not kept:
        raise too_large(len(splits))
    span = kept[-1][0]
    scope = (
        f"all {recorded}"
        if len(kept) == recorded
        else f"the latest {len(kept)} of {recorded} (the replay budget)"
    )
    groups = len({row[3] for row in kept if row[3] >= 0})
    note = (
        f"{len(kept)} requests replayed as recorded ({scope} in {SOURCES[source]}, {span:.0f} s, "
        f"{groups} prefix groups)"
    )
    return Replay(
        buckets=[],
        splits=splits,
        ttft_ms=ttft_ms,
        tbt_ms=tbt_ms,
        note=note,
        requests=len(kept),
        source=source,
        recorded=recorded,
        trace=kept,
        prefix_tokens=SHARED_PREFIX_TOKENS,
    )


def imported(*, file_format: str, requests: Sequence[TraceRequest], name: str = "") -> dict[str, Any]:
    """An imported trace as a run stores it (``WhatIfRun.trace``): its latest ``MAX_REQUESTS`` requests
    (no replay keeps more) and how many the file held."""
    latest = sorted(requests, key=lambda r: r.arrival_ms)[-MAX_REQUESTS:]
    return {
        "file_format": file_format,
        "name": name,
        "total": len(requests),
        "requests": [[r.arrival_ms, r.prompt_tokens, r.output_tokens, r.prefix_group] for r in latest],
    }


def read(text: str, *, file_format: str = "", name: str = "") -> dict[str, Any]:
    """A trace file's content as a run stores it; a bad file is a DomainError whose ``trace`` field names
    its line and field."""
    try:
        found_format, found = parse(text, file_format)
    except TraceError as error:
        where = f"line {error.line}, " if error.line else ""
        problem = f"{where}{error.field}: {error.message}"
        raise DomainError(
            f"the trace file: {problem}", code="invalid_trace", fields={"trace": [problem]}
        ) from None
    return imported(file_format=found_format, requests=found, name=name)
