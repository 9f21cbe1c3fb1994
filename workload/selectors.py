"""Reads: a topology's window of gateway records as prefix reuse, warmth and a request trace."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from django.db.models import Count

from gateway.models import GatewayRequest
from workload.hitrate import Explanation, Reuse, Warmth, explain, warmth_from_placements, warmth_from_router
from workload.tracefile import TraceRequest

ENGINE_SPAN = "llm_request"  # vLLM's request span (traces/waterfall.py reads the same)


def _records(topology_id: int, start: float, end: float) -> Any:
    return GatewayRequest.objects.filter(
        topology_id=topology_id,
        probe=False,
        created__gte=datetime.fromtimestamp(start, tz=UTC),
        created__lt=datetime.fromtimestamp(end, tz=UTC),
    ).order_by("created", "id")


def placements(*, topology_id: int, start: float, end: float) -> list[tuple[str, str]]:
    """(prefix group, first engine instance) of the window's kept traces, in arrival order: the first
    engine span (vLLM's `llm_request`, its instance the pod's name) is the prefill's, or the whole
    request's on an aggregated pod."""
    from traces.models import Span, Trace

    rows = list(
        Trace.objects.filter(
            topology_id=topology_id,
            created__gte=datetime.fromtimestamp(start, tz=UTC),
            created__lt=datetime.fromtimestamp(end, tz=UTC),
            gateway_request__isnull=False,
        )
        .order_by("created")
        .values_list("trace_id", "gateway_request__prefix_group")
    )
    first: dict[str, str] = {}
    spans = (
        Span.objects.filter(trace_id__in=[trace for trace, _ in rows], name=ENGINE_SPAN)
        .exclude(instance="")
        .order_by("trace_id", "start")
        .values_list("trace_id", "instance")
    )
    for trace, instance in spans.iterator(chunk_size=5000):
        first.setdefault(trace, instance)
    return [(group, first[trace]) for trace, group in rows if trace in first]


def delivered_hit_rate(*, topology_id: int, start: float, end: float) -> float | None:
    """The engines' prefix-cache hit rate over the window (telemetry's `topology.hit_rate`, its mean)."""
    from telemetry.selectors import history

    step = max(1, int(end - start) + 1)
    found = history(topology_id=topology_id, names=["topology.hit_rate"], start=start, end=end, step=step)
    values = [v for v in found["series"]["topology.hit_rate"] if v is not None]
    return sum(values) / len(values) if values else None


def reuse_counts(*, topology_id: int, start: float, end: float) -> Reuse:
    """`hitrate.reuse` of the window's records, counted by the database: every request of a group
    after its first is a repeat, so repeats = requests - distinct groups (one aggregate, no rows)."""
    found = (
        _records(topology_id, start, end)
        .exclude(prefix_group="")
        .order_by()
        .aggregate(requests=Count("id"), groups=Count("prefix_group", distinct=True))
    )
    return Reuse(
        requests=found["requests"], repeats=found["requests"] - found["groups"], groups=found["groups"]
    )


def router_warmth(*, topology_id: int, start: float, end: float) -> Warmth | None:
    """The router's own count over the window (Kthena's ``kthena_router_prefix_cache_match_ratio``,
    collected by telemetry as ``router.match_attempts`` / ``router.match_misses``); None when it counted
    no attempt."""
    from telemetry.selectors import series_totals

    names = ["router.match_attempts", "router.match_misses"]
    found = series_totals(topology_id=topology_id, names=names, start=start, end=end)
    attempts, misses = found["router.match_attempts"], found["router.match_misses"]
    if not attempts:
        return None
    return warmth_from_router(attempts=attempts, misses=misses or 0.0)


def hit_rate_breakdown(*, topology_id: int, start: float, end: float) -> Explanation:
    """Routed warm from the router's own metric when it counted the window, else from the kept traces."""
    counts = reuse_counts(topology_id=topology_id, start=start, end=end)
    warmth = router_warmth(topology_id=topology_id, start=start, end=end)
    if warmth is None:
        traced = warmth_from_placements(placements(topology_id=topology_id, start=start, end=end))
        warmth = traced if traced.repeats else None
    delivered = delivered_hit_rate(topology_id=topology_id, start=start, end=end)
    return explain(counts, warmth, delivered)


def breakdown_payload(explanation: Explanation, *, start: float, end: float) -> dict[str, Any]:
    return {**asdict(explanation), "start": start, "end": end}


def trace_requests(*, topology_id: int, start: float, end: float) -> list[TraceRequest]:
    """The window's application requests (no probes) as a trace, arrivals in ms from the first."""
    rows = _records(topology_id, start, end).values_list(
        "created", "prompt_tokens", "completion_tokens", "prefix_group"
    )
    found: list[TraceRequest] = []
    first: datetime | None = None
    for created, prompt, output, group in rows.iterator(chunk_size=5000):
        first = first or created
        found.append(TraceRequest(round((created - first).total_seconds() * 1000), prompt, output, group))
    return found
