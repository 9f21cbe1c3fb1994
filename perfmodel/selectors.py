"""Reads for the calibration: a window of a topology's stored telemetry, as ``calibration.Interval``s."""

from __future__ import annotations

import statistics
import time

from perfmodel.calibration import Calibration, Interval, calibrate
from telemetry import selectors as telemetry_selectors

ROLE_FIELDS = (
    "requests_ps", "prompt_tps", "gen_tps", "hit_rate", "running", "waiting", "ttft_p50", "tbt_p50",
    "ttft_mean", "tbt_mean",
)  # fmt: skip
MIN_WINDOW_S = 10
MAX_WINDOW_S = 3600


def _pod_roles(topology_id: int) -> dict[str, str]:
    snapshot = telemetry_selectors.latest_snapshot(topology_id=topology_id)
    if snapshot is None:
        return {}
    return {pod["name"]: pod["role"] for pod in snapshot["pods"]}


def window_intervals(*, topology_id: int, start: float, end: float) -> list[Interval]:
    """One Interval per role and collection in [start, end): the role series, the number of that
    role's pods that reported in the collection (their ``pod.<name>.running`` points) and the mean
    transfer time of the KV links (``link.<prefill>.<decode>.xfer_mean_ms``)."""
    points = telemetry_selectors.raw_points(
        topology_id=topology_id, prefixes=("role.", "pod.", "link."), start=start, end=end
    )
    roles = _pod_roles(topology_id)
    by_ts: dict[tuple[float, str], dict[str, float]] = {}
    pods: dict[tuple[float, str], int] = {}
    xfer: dict[float, list[float]] = {}
    xfer_bytes: dict[float, float] = {}
    for name, rows in points.items():
        parts = name.split(".")
        if parts[0] == "role" and len(parts) == 3 and parts[2] in ROLE_FIELDS:
            for ts, value in rows:
                by_ts.setdefault((round(ts, 3), parts[1]), {})[parts[2]] = value
        elif parts[0] == "pod" and name.endswith(".running"):
            role = roles.get(name[len("pod.") : -len(".running")])
            if role in ("prefill", "decode", "both"):
                for ts, _ in rows:
                    key = (round(ts, 3), role)
                    pods[key] = pods.get(key, 0) + 1
        elif parts[0] == "link" and name.endswith(".xfer_mean_ms"):
            for ts, value in rows:
                xfer.setdefault(round(ts, 3), []).append(value)
        elif parts[0] == "link" and name.endswith(".bytes_per_s"):
            for ts, value in rows:
                xfer_bytes[round(ts, 3)] = xfer_bytes.get(round(ts, 3), 0.0) + value
    out = []
    for (ts, role), values in sorted(by_ts.items()):
        out.append(
            Interval(
                ts=ts,
                role=role,
                pods=pods.get((ts, role), 1),
                xfer_ms=statistics.fmean(xfer[ts]) if role == "decode" and xfer.get(ts) else None,
                xfer_bytes_ps=xfer_bytes.get(ts) if role == "decode" else None,
                **{field: values.get(field) for field in ROLE_FIELDS},
            )
        )
    return out


def topology_calibration(*, topology_id: int, window_s: int, now: float | None = None) -> Calibration:
    """The calibration of the last ``window_s`` seconds of the topology's telemetry."""
    end = time.time() if now is None else now
    return calibrate(window_intervals(topology_id=topology_id, start=end - window_s, end=end + 1e-3))
