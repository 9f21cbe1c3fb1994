"""Reads of what-if runs and of the traffic they replay."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet

from gateway.models import GatewayRequest
from whatif.models import ACTIVE_STATES, WhatIfRun
from workload.tracefile import TraceRequest


def whatif_run_list(*, topology: Any) -> QuerySet[WhatIfRun]:
    return WhatIfRun.objects.filter(topology=topology).select_related("topology")


def whatif_run_all() -> QuerySet[WhatIfRun]:
    return WhatIfRun.objects.select_related("topology")


def whatif_run_active(*, topology: Any) -> WhatIfRun | None:
    return whatif_run_list(topology=topology).filter(state__in=ACTIVE_STATES).first()


def gateway_trace(
    *, topology_id: int, start: float, end: float, limit: int
) -> tuple[int, list[TraceRequest]]:
    """The window's application requests the gateway recorded (no probes, none it refused): how many, and
    the latest ``limit`` of them as a trace (arrival ms from the window's start)."""
    records = GatewayRequest.objects.filter(
        topology_id=topology_id,
        probe=False,
        status__lt=400,
        created__gte=datetime.fromtimestamp(start, tz=UTC),
        created__lt=datetime.fromtimestamp(end, tz=UTC),
    )
    latest = list(
        records.order_by("-created", "-id").values_list(
            "created", "prompt_tokens", "completion_tokens", "prefix_group"
        )[:limit]
    )
    latest.reverse()
    found = [
        TraceRequest(round((created.timestamp() - start) * 1000), prompt, output, group)
        for created, prompt, output, group in latest
    ]
    return records.count(), found
