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


@pytest.fixture
def calibrated():
    """Store the last 4 minutes of per-role telemetry (one pod per role, a point every 20 s) drawn from
    known rates: prefill 0.2 ms per uncached prompt token with a 0.3 prefix-cache hit rate, decode steps
    of 20 ms + 1.5 ms per running sequence (+ 0.5 ms overhead); the measured TTFT, TBT and token rates
    carry a deterministic ±3 % noise. A calibration of it is ``ok``."""
    from telemetry.models import Point, Series

    def put(topology, *, intervals: int = 12) -> None:
        now = time.time()
        values: dict[str, list[tuple[float, float]]] = {}
        for i in range(intervals):
            noise = 1 + 0.03 * ((i * 7) % 5 - 2) / 2  # 0.97 .. 1.03
            prompt, hit, rps = 1000.0 + 200 * (i % 4), 0.3, 1.0 + 0.5 * (i % 3)
            service = 0.5 + 0.2 * prompt * (1 - hit)
            rho = rps * service / 1000
            batch = (2, 8, 16)[i % 3]
            step = 0.5 + 20.0 + 1.5 * batch
            row = {
                "role.prefill.requests_ps": rps,
                "role.prefill.prompt_tps": prompt * rps,
                "role.prefill.hit_rate": hit,
                "role.prefill.running": 1.0,
                "role.prefill.waiting": 0.0,
                "role.prefill.ttft_p50": noise * (service + rho * service / (2 * (1 - rho))) / 1000,
                "role.decode.running": float(batch),
                "role.decode.gen_tps": batch * 1000 / step / noise,
                "role.decode.tbt_p50": step * (2 - noise) / 1000,
            }
            for name, value in row.items():
                values.setdefault(name, []).append((now - 20 * (intervals - i), value))
        for name, points in values.items():
            series = Series.objects.create(topology=topology, name=name)
            Point.objects.bulk_create(
                Point(series=series, ts=datetime.fromtimestamp(ts, tz=UTC), value=value)
                for ts, value in points
            )

    return put
