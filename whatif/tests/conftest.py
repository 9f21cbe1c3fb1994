"""What-if tests reuse the rebalancing fixtures (a qwen-gpu-nixl topology with budget 4 on a cluster that is
not there) and add recorded traffic, as the telemetry rollups store it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from rebalancing.tests.conftest import cluster, make_topology, nothing_else_scales_nowhere  # noqa: F401


@pytest.fixture
def record():
    """Store ``minutes`` of per-minute telemetry for a topology: small traffic, so a replay takes ~0.3 s."""
    from telemetry.models import Point, Series

    def put(
        topology, *, minutes: int = 2, rate: float = 0.5, prompt: float = 200.0, gen: float = 10.0
    ) -> None:
        now = time.time()
        for name, value in (
            ("topology.requests_ps", rate),
            ("topology.prompt_tps", prompt),
            ("topology.gen_tps", gen),
        ):
            series = Series.objects.create(topology=topology, name=name)
            Point.objects.bulk_create(
                Point(series=series, ts=datetime.fromtimestamp(now - 60 * m - 30, tz=UTC), value=value)
                for m in range(minutes)
            )

    return put
