"""Each telemetry interval is counted against the SLOs: the engines' histogram increments (decode's) and
outcome counters become good/total events, through the signal telemetry sends after storing it."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest

from slo import services
from slo.models import SliMinute
from telemetry.derive import request_window
from telemetry.signals import interval_collected


def _sample(ts: float, ttft: list[float], ok: float, failed: float) -> dict:
    bounds = [0.1, 0.5, 1.0, math.inf]
    return {
        "engine": "vllm",
        "ts": ts,
        "counters": {"http_2xx": ok, "http_5xx": failed},
        "gauges": {},
        "histograms": {
            "ttft": {"buckets": list(zip(bounds, ttft, strict=True)), "sum": 0.0, "count": ttft[-1]}
        },
        "info": {},
    }


def test_the_interval_window_reads_decode_increments_and_outcomes() -> None:
    samples = [
        ("decode", _sample(12.0, [10, 70, 95, 100], 100, 4), _sample(10.0, [0, 20, 25, 30], 40, 2)),
        ("prefill", _sample(12.0, [90, 90, 90, 90], 0, 1), _sample(10.0, [0, 0, 0, 0], 0, 0)),
    ]
    window = request_window(samples)  # type: ignore[arg-type]
    assert window.ttft == [(0.1, 10.0), (0.5, 50.0), (1.0, 70.0), (math.inf, 70.0)]  # decode's only
    assert window.outcomes is not None
    assert (window.outcomes.ok, window.outcomes.failed) == (60.0, 3.0)  # prefill's 5xx fails requests too


@pytest.mark.django_db
def test_a_collected_interval_is_counted_per_slo(topology, operator) -> None:
    ttft = services.slo_create(
        topology=topology, sli="ttft", objective=0.99, threshold_ms=500, actor=operator
    )
    success = services.slo_create(topology=topology, sli="success", objective=0.995, actor=operator)
    now = time.time()
    window = request_window(
        [("decode", _sample(now, [10, 70, 95, 100], 100, 4), _sample(now - 2, [0, 20, 25, 30], 40, 2))]
    )  # type: ignore[list-item]
    interval_collected.send(sender=None, topology_id=topology.pk, ts=now, requests=window)
    minute = datetime.fromtimestamp(now, tz=UTC).replace(second=0, microsecond=0)
    assert (SliMinute.objects.get(slo=ttft, minute=minute).good, SliMinute.objects.get(slo=ttft).total) == (
        50,
        70,
    )
    assert (SliMinute.objects.get(slo=success).good, SliMinute.objects.get(slo=success).total) == (60, 62)
