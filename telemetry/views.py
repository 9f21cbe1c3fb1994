"""The live telemetry panel on the topology page (the overview page lives in controlplane.views)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.urls import reverse

from telemetry import selectors

#: Time windows of the history charts: (seconds, label).
WINDOWS: tuple[tuple[int, str], ...] = (
    (300, "5 min"),
    (900, "15 min"),
    (3600, "1 h"),
    (21600, "6 h"),
    (86400, "24 h"),
)
DEFAULT_WINDOW_S = 900
#: Per-pod table columns: (snapshot field, header, numeric).
POD_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("name", "Pod", False),
    ("role", "Role", False),
    ("ready", "Ready", False),
    ("hit_rate", "Hit rate", True),
    ("ttft_p95", "TTFT p95", True),
    ("tbt_p95", "TBT p95", True),
    ("prompt_tps", "Prompt tok/s", True),
    ("gen_tps", "Gen tok/s", True),
    ("running", "Running", True),
    ("waiting", "Waiting", True),
    ("kv_usage", "KV usage", True),
    ("error_rate", "Errors", True),
    ("client_error_rate", "Client 4xx", True),
)


def stale_after_seconds(interval_s: float) -> float:
    """Data is called stale after four missed intervals, and never sooner than 8 s."""
    return max(8.0, 4 * interval_s)


def topology_live_panel_context(topology: Any) -> dict[str, Any]:
    """Context of ``telemetry/_topology_live.html`` for one topology (registered as a topology panel)."""
    interval_s = float(settings.TELEMETRY_INTERVAL_SECONDS)
    return {
        "live": {
            "topology_id": topology.pk,
            "ws_path": f"/ws/topologies/{topology.pk}/",
            "history_url": reverse("api:topology-metrics", kwargs={"pk": topology.pk}),
            "interval_s": interval_s,
            "stale_after_s": stale_after_seconds(interval_s),
            "window_s": DEFAULT_WINDOW_S,
            "windows": WINDOWS,
            "columns": POD_COLUMNS,
            "snapshot": selectors.latest_snapshot(topology_id=topology.pk),
        }
    }


_PROBLEM_STATES = ("down", "degraded", "stale")
_CLUSTER_ORDER = {"unreachable": 0, "degraded": 1, "unknown": 2, "healthy": 3}


def overview_context(rows: Sequence[Mapping[str, Any]], clusters: Iterable[Any]) -> dict[str, Any]:
    """Context of the overview page: topology rows (already problems first) and clusters, problems first."""
    shown = [
        {
            **row,
            "ttft_p95_ms": row["ttft_p95"] * 1000 if row["ttft_p95"] is not None else None,
            "tbt_p95_ms": row["tbt_p95"] * 1000 if row.get("tbt_p95") is not None else None,
        }
        for row in rows
    ]
    cluster_rows = sorted(clusters, key=lambda c: (_CLUSTER_ORDER.get(c.health_state, 2), c.name))
    problems = sum(
        1
        for row in shown
        if row["rollout"]["problem"]
        or (
            row["deployed"]
            and (row["health"]["state"] in _PROBLEM_STATES or row["slo"]["state"] == "violated")
        )
    )
    return {
        "rows": shown,
        "clusters": cluster_rows,
        "problem_count": problems,
        "deployed_count": sum(1 for row in shown if row["deployed"]),
        "healthy_clusters": sum(1 for c in cluster_rows if c.health_state == "healthy"),
        "stale_after_s": stale_after_seconds(float(settings.TELEMETRY_INTERVAL_SECONDS)),
    }
