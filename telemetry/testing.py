"""For tests that drive collection themselves instead of Celery beat."""

from __future__ import annotations

import time

from django.conf import settings

from telemetry import services
from telemetry.snapshot import TopologySnapshot


def collect_intervals(topology_id: int, count: int) -> list[TopologySnapshot]:
    """Collect ``count`` times an interval apart, as beat does: a collection takes the link probes
    that ended since the one before (``telemetry.linkinputs``), so back-to-back collections would see
    a probe later than the product does."""
    snapshots = []
    for turn in range(count):
        if turn:
            time.sleep(float(settings.TELEMETRY_INTERVAL_SECONDS))
        snapshot = services.telemetry_collect(topology_id=topology_id)
        assert snapshot is not None, f"topology {topology_id} is not deployed"
        snapshots.append(snapshot)
    return snapshots
