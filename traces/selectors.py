"""Reads of traces/: a topology's recent slow and failed requests, and one trace's waterfall."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from traces.models import Kept, Span, Trace
from traces.waterfall import SpanRow, Waterfall, build


def recent_problems(*, topology_id: int, limit: int = 20) -> QuerySet[Trace]:
    """The topology's latest kept slow and failed requests, newest first."""
    return Trace.objects.filter(topology_id=topology_id, kept__in=(Kept.SLOW, Kept.FAILED))[:limit]


def trace_spans(*, trace_id: str) -> list[SpanRow]:
    fields = ("span_id", "parent_span_id", "name", "service_name", "instance", "start", "end")
    rows = Span.objects.filter(trace_id=trace_id).values(*fields, "status_code", "attributes")
    return [SpanRow(**row) for row in rows]


def tracing_mode(spec: dict[str, Any]) -> str:
    tracing = spec.get("tracing") if isinstance(spec, dict) else None
    return str((tracing or {}).get("mode") or "off")


def trace_waterfall(*, trace: Trace) -> Waterfall:
    topology = trace.topology
    spec = topology.spec if topology is not None else {}
    engine = str(spec.get("engine") or "vllm") if isinstance(spec, dict) else "vllm"
    values = {
        "status": trace.status,
        "backend": trace.backend,
        "prompt_tokens": trace.prompt_tokens,
        "completion_tokens": trace.completion_tokens,
        "cached_tokens": trace.cached_tokens,
    }
    return build(
        values,
        trace_spans(trace_id=trace.trace_id),
        engine=engine,
        tracing=tracing_mode(spec),
        has_router=True,
    )
