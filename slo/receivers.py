"""Each telemetry interval's requests are counted against the topology's SLOs."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from slo import services
from telemetry.derive import RequestWindow
from telemetry.signals import interval_collected


@receiver(interval_collected, dispatch_uid="slo.count_interval")
def count_interval(
    sender: Any, *, topology_id: int, ts: float, requests: RequestWindow, **kwargs: Any
) -> None:
    services.sli_record(topology_id=topology_id, ts=ts, requests=requests)
