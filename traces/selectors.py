"""Reads of traces/: a topology's recent slow and failed requests, and one trace's waterfall."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from traces.models import Kept, Span, Trace
from traces.store import KINDS, StoreError, StoreSettings, fetch
from traces.waterfall import GATEWAY_SERVICE, SpanRow, Waterfall, build


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
    spans = trace_spans(trace_id=trace.trace_id)
    source, error = "", ""
    cluster = topology.cluster if topology is not None else None
    if cluster is not None and cluster.trace_store in KINDS and not _engine_spans(spans):
        store = StoreSettings(cluster.trace_store, cluster.trace_store_url, cluster.trace_store_token)
        try:
            found = fetch(store, trace.trace_id)
        except StoreError as failure:
            error = str(failure)
        else:
            known = {s.span_id for s in spans}
            spans += [s for s in found if s.span_id not in known and s.service_name != GATEWAY_SERVICE]
            source = store.label
    waterfall = build(values, spans, engine=engine, tracing=tracing_mode(spec), has_router=True)
    waterfall.source, waterfall.store_error = source, error
    if error:
        waterfall.missing.insert(
            0, f"The engines' spans could not be read from the cluster's trace store: {error}."
        )
    elif source and not _engine_spans(spans):
        waterfall.missing.insert(0, f"{source} holds no engine span of this trace.")
    return waterfall


def _engine_spans(spans: list[SpanRow]) -> bool:
    """Whether any span came from somewhere else than the gateway (an engine, the router)."""
    return any(s.service_name != GATEWAY_SERVICE for s in spans)
