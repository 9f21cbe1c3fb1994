"""The topology page's hit-rate panel: the last hour's breakdown (workload.selectors)."""

from __future__ import annotations

import time
from typing import Any

from workload import selectors

PANEL_WINDOW_S = 3600
VERDICT = {  # verdict → (state colour, label)
    "routing": ("warn", "routing loses the reuse"),
    "engine": ("warn", "the engines lose the reuse"),
    "fine": ("ok", "no large loss"),
    "little_reuse": ("unknown", "little reuse"),
    "unknown": ("unknown", "not known yet"),
}


SOURCE_NOTE = {  # where routed warm came from (workload.selectors.hit_rate_breakdown)
    "router": " (from the router's own kthena_router_prefix_cache_match_ratio)",
    "traces": " (from the kept traces)",
}


def router_note(topology_id: int) -> str:
    """Why the router's own figure is not there, from the latest collection ("" when it was read or the
    topology has no Kthena router)."""
    from telemetry.selectors import latest_snapshot

    snapshot = latest_snapshot(topology_id=topology_id)
    reading = snapshot.get("router") if snapshot is not None else None
    error = reading["error"] if reading is not None else None
    return f"; the router's own figure: {error}" if error else ""


def panel_context(topology: Any) -> dict[str, Any]:
    end = time.time()
    found = selectors.hit_rate_breakdown(topology_id=topology.pk, start=end - PANEL_WINDOW_S, end=end)
    unread = router_note(topology.pk) if found.routed_source != "router" else ""
    rows = [
        ("Reuse available", found.reuse, "requests repeating a prefix seen earlier in the hour"),
        (
            "Routed warm",
            found.routed_warm,
            "of those, placed on an instance that had served the prefix"
            + SOURCE_NOTE.get(found.routed_source, " (no kept trace names one yet)")
            + unread,
        ),
        (
            "Delivered",
            found.delivered,
            "the engines' prefix-cache hit rate (tokens)"
            + ("" if found.delivered is not None else ": no telemetry in the hour"),
        ),
    ]
    return {
        "topology": topology,
        "hit": found,
        "rows": [
            (label, value, None if value is None else round(value * 100), note) for label, value, note in rows
        ],
        "state": VERDICT[found.verdict][0],
        "label": VERDICT[found.verdict][1],
    }
