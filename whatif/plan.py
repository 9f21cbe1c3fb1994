"""What a what-if run replays (reads and pure planning, no writes): its traffic, from the best source there
is, within the work bounds.

Traffic, in this order: the imported trace the run was started with; else the gateway's per-request
records of the window when there are enough of them (``tracereplay.gateway_enough``); else the per-minute
telemetry as Poisson buckets (``simulation.replay_plan``).
"""

from __future__ import annotations

from typing import Any

from whatif import selectors, simulation, tracereplay
from whatif.models import WhatIfRun
from workload.tracefile import TraceRequest

HISTORY_NAMES = ["topology.requests_ps", "topology.prompt_tps", "topology.gen_tps"]


def traffic(
    *, run: WhatIfRun, splits: list[tuple[int, int]], ttft_ms: float, tbt_ms: float
) -> simulation.Replay:
    from telemetry.selectors import history

    if run.trace:
        imported = [TraceRequest(*row) for row in run.trace["requests"]]
        return tracereplay.trace_plan(
            requests=imported,
            source="imported",
            recorded=int(run.trace.get("total") or len(imported)),
            splits=splits,
            ttft_ms=ttft_ms,
            tbt_ms=tbt_ms,
        )
    recorded: dict[str, Any] = dict(
        history(
            topology_id=run.topology_id,
            names=HISTORY_NAMES,
            start=run.window_start,
            end=run.window_end,
            step=60,
        )
    )
    counted = sum(b["rate"] * b["seconds"] for b in simulation.buckets_from_history(recorded))
    total, found = selectors.gateway_trace(
        topology_id=run.topology_id,
        start=run.window_start,
        end=run.window_end,
        limit=simulation.MAX_REQUESTS,
    )
    if tracereplay.gateway_enough(total, counted):
        return tracereplay.trace_plan(
            requests=found, source="gateway", recorded=total, splits=splits, ttft_ms=ttft_ms, tbt_ms=tbt_ms
        )
    return simulation.replay_plan(recorded=recorded, splits=splits, ttft_ms=ttft_ms, tbt_ms=tbt_ms)
