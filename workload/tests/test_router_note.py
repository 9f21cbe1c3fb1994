"""The hit-rate panel says why the router's own figure is missing when it falls back to the traces."""

from __future__ import annotations

import time

from telemetry import cache
from telemetry.snapshot import empty_snapshot
from workload.views import panel_context


def test_the_panel_names_why_the_routers_figure_is_not_used(topology):
    try:
        plain = panel_context(topology)
        note = next(n for label, _, _, n in plain["rows"] if label == "Routed warm")
        assert "the router's own figure" not in note
        snapshot = empty_snapshot(topology.pk, time.time(), 2.0, "")
        snapshot["router"] = {
            "service": "kthena-system/kthena-router-metrics",
            "replicas": 0,
            "match_attempts": None,
            "match_misses": None,
            "error": "the router's metrics Service kthena-system/kthena-router-metrics has no ready address",
        }
        cache.set_snapshot(snapshot)
        note = next(n for label, _, _, n in panel_context(topology)["rows"] if label == "Routed warm")
        assert note.endswith(
            "; the router's own figure: the router's metrics Service "
            "kthena-system/kthena-router-metrics has no ready address"
        ), note
    finally:
        cache.forget(topology.pk)
