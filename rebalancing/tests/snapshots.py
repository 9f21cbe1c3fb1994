"""Telemetry snapshots for planner tests, stored as the collector stores them (Redis and the database)."""

from __future__ import annotations

import time


def prefill_short(topology, *, waiting: float) -> None:
    """A telemetry snapshot of 1P/2D whose prefill queues (TTFT 2.4 s) while decode has room, as the
    collector stores it; ``waiting`` 0 is the same load with the queue gone."""
    from django.utils import timezone

    from telemetry import cache
    from telemetry.models import LatestSnapshot
    from telemetry.snapshot import empty_snapshot

    snap = empty_snapshot(topology.pk, time.time(), 2.0, "test")
    snap["health"] = {"state": "healthy", "reasons": []}
    snap["slo"] = {"ttft_p95_ms": 2400.0 if waiting else 400.0, "tbt_p95_ms": 20.0}
    snap["roles"] = {
        "prefill": {"ready": 1, "waiting": waiting, "prompt_tps": 1500.0, "requests_ps": 10.0},
        "decode": {"ready": 2, "waiting": 0.0, "gen_tps": 300.0, "requests_ps": 10.0, "kv_usage": 0.1},
    }
    cache.set_snapshot(snap)
    LatestSnapshot.objects.update_or_create(
        topology_id=topology.pk, defaults={"ts": timezone.now(), "data": snap}
    )
