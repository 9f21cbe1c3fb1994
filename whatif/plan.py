"""What a what-if run replays (reads and pure planning, no writes): its traffic, from the best source there
is, within the work bounds, on the engine model calibrated on the topology's own telemetry when there is one.

Traffic, in this order: the imported trace the run was started with; else the gateway's per-request
records of the window when there are enough of them (``tracereplay.gateway_enough``); else the per-minute
telemetry as Poisson buckets (``simulation.replay_plan``).

Model: the calibration of the window's last hour at most (``perfmodel.calibration``, as
``GET /topologies/{id}/calibration/`` answers it). With the verdict ``ok`` the simulator runs the fitted
prefill rate, decode step cost and KV transfer time, and per-minute buckets find the observed prefix-cache
hit rate in the cache (a trace's prefix groups make their own hits). Otherwise it runs the nominal model,
the table is marked uncalibrated and no split is recommended: the result says why and what to run.
"""

from __future__ import annotations

from dataclasses import replace
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


def calibration(*, run: WhatIfRun) -> dict[str, Any]:
    """The topology's calibration over the run's window (at most its last hour, the calibration's
    limit), as the calibration endpoint answers it."""
    from perfmodel.selectors import MAX_WINDOW_S, MIN_WINDOW_S, topology_calibration

    window = max(MIN_WINDOW_S, min(MAX_WINDOW_S, round(run.window_end - run.window_start)))
    found = topology_calibration(topology_id=run.topology_id, window_s=window, now=run.window_end)
    return {"topology": run.topology_id, "window_s": window, **found.as_dict()}


def on_model(replay: simulation.Replay, found: dict[str, Any]) -> simulation.Replay:
    """``replay`` on the calibrated model when the calibration is ok, else on the nominal one."""
    if found["verdict"] != "ok":
        return replay
    hit = found["parameters"].get("hit_rate", {}).get("value") if replay.trace is None else None
    return replace(replay, perf=dict(found["perf"]), prefix_hit_rate=float(hit or 0.0))


def _errors(found: dict[str, Any]) -> str:
    parts = [
        f"{e['role']} {e['metric'].upper()} {e['mape']:.0%}"
        for e in found["fit_errors"]
        if e["mape"] is not None
    ]
    return ", ".join(parts) or "none measured"


def result(
    *, replay: simulation.Replay, rows: list[dict[str, Any]], found: dict[str, Any], current: dict[str, int]
) -> dict[str, Any]:
    """The stored result: the table, its traffic source, the calibration with its fit errors, and a
    recommended split only when the model was calibrated."""
    ok = found["verdict"] == "ok"
    window = f"{found['window_s'] // 60} min" if found["window_s"] >= 60 else f"{found['window_s']} s"
    model = (
        f"the engine performance model calibrated on this topology's last {window} (median fit error "
        f"{_errors(found)})"
        if ok
        else "the nominal engine performance model (uncalibrated)"
    )
    out: dict[str, Any] = {
        "requests": replay.requests,
        "traffic_source": replay.source,
        "recorded_requests": replay.recorded,
        "splits": rows,
        "current": current,
        "calibrated": ok,
        "calibration": found,
        "note": f"{replay.note}, on {model}; {GOODPUT}",
    }
    best = simulation.recommended(rows) if ok else None
    if best is not None:
        out["recommended"] = best
    else:
        why = " ".join(found["reasons"]) or "the calibration is not ok"
        out["no_recommendation"] = (
            "No split is recommended: the model is not calibrated on this topology "
            f"({found['verdict']}). {why}"
        )
    return out


GOODPUT = (
    "goodput = the highest rate (0.5×–2× the replayed one) at which ≥ 90 % of requests meet both TTFT and "
    "TBT targets"
)
