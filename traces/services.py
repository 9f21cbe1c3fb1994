"""Writes of traces/: spans received over OTLP, the gateway's kept requests, retention."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min, OuterRef, Subquery

from traces import otlp, sampling
from traces.models import Span, Trace

logger = logging.getLogger(__name__)
SPAN_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "service_name",
    "instance",
    "kind",
    "start",
    "end",
    "status_code",
    "status_message",
    "attributes",
)


def kept_key(trace_id: str) -> str:
    """The gateway's decision on a trace: b"1" kept (slow or failed), b"0" not kept; absent: undecided."""
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'tandem')}:traces:kept:{trace_id}"


def pending_key(trace_id: str) -> str:
    """Spans of a trace the gateway has not decided on yet (its request still runs), parked a while."""
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'tandem')}:traces:pending:{trace_id}"


def _when(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


@dataclass(frozen=True)
class Received:
    stored: int
    parked: int  # of traces still undecided: kept in Redis until the gateway's request ends
    dropped: int  # of traces not kept (sampled out): accepted and not stored, as the spec allows
    rejected: int
    problem: str


def decisions(trace_ids: set[str]) -> tuple[set[str], set[str]]:
    """(kept, undecided) among these traces: kept when head-sampled by id or marked kept by the
    gateway (tail); undecided when the gateway has said nothing yet; the rest are not kept."""
    rate = settings.TRACES_HEAD_SAMPLE_RATE
    kept = {t for t in trace_ids if sampling.head_kept(t, rate)}
    rest = [t for t in trace_ids if t not in kept]
    undecided: set[str] = set()
    if rest:
        from keys import limits

        marks: list[bytes | None] = limits.client().mget([kept_key(t) for t in rest])  # type: ignore[assignment]
        for trace_id, mark in zip(rest, marks, strict=True):
            if mark == b"1":
                kept.add(trace_id)
            elif mark is None:
                undecided.add(trace_id)
    return kept, undecided


def spans_receive(*, body: bytes, content_type: str) -> Received:
    """Decode an export request; store the spans of kept traces (one COPY on PostgreSQL), park those of
    traces whose gateway request has not ended (one Redis pipeline), drop the rest.

    Raises otlp.OtlpError when the body is not an export request."""
    decoded = otlp.decode(body, content_type)
    if not decoded.spans:
        return Received(0, 0, 0, decoded.rejected, decoded.problem)
    kept, undecided = decisions({s.trace_id for s in decoded.spans})
    spans = [s for s in decoded.spans if s.trace_id in kept]
    if spans:
        spans_insert(spans)
    waiting = [s for s in decoded.spans if s.trace_id in undecided]
    if waiting:
        _park(waiting)
    dropped = len(decoded.spans) - len(spans) - len(waiting)
    return Received(len(spans), len(waiting), dropped, decoded.rejected, decoded.problem)


def _park(spans: list[otlp.SpanIn]) -> None:
    from keys import limits

    pipe = limits.client().pipeline(transaction=False)
    for span in spans:
        key = pending_key(span.trace_id)
        pipe.rpush(key, json.dumps(asdict(span), default=str))
        pipe.expire(key, settings.TRACES_PENDING_SECONDS)
    pipe.execute()


def _unpark(trace_ids: list[str]) -> list[otlp.SpanIn]:
    """The parked spans of these traces, taken (each trace's list read and deleted)."""
    from keys import limits

    pipe = limits.client().pipeline(transaction=True)
    for trace_id in trace_ids:
        pipe.lrange(pending_key(trace_id), 0, -1)
        pipe.delete(pending_key(trace_id))
    replies = pipe.execute()
    return [otlp.SpanIn(**json.loads(raw)) for items in replies[::2] for raw in items]


def decisions_record(*, kept: list[str], dropped: list[str]) -> int:
    """Record the gateway's decisions (spans arriving later are stored or dropped on sight) and store
    the spans parked for kept traces; returns how many parked spans were stored."""
    from keys import limits

    window = settings.TRACES_KEEP_WINDOW_SECONDS
    pipe = limits.client().pipeline(transaction=False)
    for trace_id in kept:
        pipe.set(kept_key(trace_id), b"1", ex=window)
    for trace_id in dropped:
        pipe.set(kept_key(trace_id), b"0", ex=window, nx=True)  # a later request of a trace may keep it
        pipe.delete(pending_key(trace_id))
    pipe.execute()
    parked = _unpark(kept) if kept else []
    if parked:
        spans_insert(parked)
    return len(parked)


def _row(span: otlp.SpanIn) -> tuple[Any, ...]:
    return (
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.name,
        span.service_name,
        span.instance,
        span.kind,
        _when(span.start_ns),
        _when(span.end_ns),
        span.status_code,
        span.status_message,
        json.dumps(span.attributes, default=str),
    )


def spans_insert(spans: list[otlp.SpanIn]) -> None:
    from django.db import close_old_connections

    close_old_connections()
    if connection.vendor != "postgresql":
        Span.objects.bulk_create(
            [Span(**dict(zip(SPAN_COLUMNS, (*_row(s)[:-1], s.attributes), strict=True))) for s in spans]
        )
        return
    quote = connection.ops.quote_name
    columns = ", ".join(quote(c) for c in SPAN_COLUMNS)
    statement = f"COPY {quote(Span._meta.db_table)} ({columns}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for span in spans:
            copy.write_row(_row(span))


@dataclass(frozen=True)
class GatewayTrace:
    """A kept request as the gateway saw it: the Trace row and the gateway's own span."""

    trace_id: str
    span_id: str
    parent_span_id: str
    kept: str
    reason: str
    start: datetime
    end: datetime
    topology_id: int | None
    topology_name: str
    model: str
    endpoint: str
    backend: str
    status: int
    error_code: str
    stream: bool
    latency_ms: float
    ttft_ms: float | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None


@transaction.atomic
def gateway_traces_store(*, records: list[GatewayTrace]) -> None:
    """Trace rows (a trace already kept by an earlier request of the same caller's trace stays as it
    is), the gateway's spans, and each trace's link to its gateway record once that is written."""
    Trace.objects.bulk_create(
        [
            Trace(
                trace_id=r.trace_id,
                created=r.start,
                topology_id=r.topology_id,
                gateway_span_id=r.span_id,
                kept=r.kept,
                reason=r.reason[:200],
                model=r.model[:256],
                endpoint=r.endpoint,
                backend=r.backend,
                status=r.status,
                error_code=r.error_code,
                stream=r.stream,
                latency_ms=r.latency_ms,
                ttft_ms=r.ttft_ms,
                prompt_tokens=r.prompt_tokens,
                completion_tokens=r.completion_tokens,
                cached_tokens=r.cached_tokens,
            )
            for r in records
        ],
        ignore_conflicts=True,
    )
    Span.objects.bulk_create(
        [
            Span(
                trace_id=r.trace_id,
                span_id=r.span_id,
                parent_span_id=r.parent_span_id,
                name=f"gateway {r.endpoint}",
                service_name="tandem-gateway",
                instance=r.topology_name,
                kind=2,
                start=r.start,
                end=r.end,
                status_code=2 if r.status >= 500 or r.status == 0 else 0,
                status_message=r.error_code,
                attributes={
                    "tandem.backend": r.backend,
                    "http.response.status_code": r.status,
                    "gen_ai.request.model": r.model,
                    "gen_ai.usage.prompt_tokens": r.prompt_tokens,
                    "gen_ai.usage.completion_tokens": r.completion_tokens,
                    "tandem.cached_tokens": r.cached_tokens,
                    "tandem.ttft_ms": r.ttft_ms,
                    "tandem.kept": r.kept,
                },
            )
            for r in records
        ]
    )
    traces_link_records()


def traces_link_records() -> int:
    """Link recent traces to their gateway request records (written by the gateway's recorder): the
    first one written (the lowest id) of each trace. Grouped by trace id, so the only way to read it is
    the trace id's index: `ORDER BY created LIMIT 1` let PostgreSQL walk the `created` index instead,
    through every record for a trace whose record is not written yet (minutes a batch, every two
    seconds, on a gateway that fails over and so keeps every request's trace)."""
    from gateway.models import GatewayRequest

    since = datetime.now(UTC) - timedelta(minutes=10)
    found = (
        GatewayRequest.objects.filter(trace_id=OuterRef("trace_id"))
        .values("trace_id")
        .annotate(first=Min("id"))
        .values("first")
    )
    return Trace.objects.filter(gateway_request__isnull=True, created__gte=since).update(
        gateway_request=Subquery(found)
    )


def traces_prune(*, now: datetime | None = None) -> tuple[int, int]:
    """Delete traces and spans older than TRACES_RETENTION_HOURS; (traces, spans) deleted."""
    cutoff = (now or datetime.now(UTC)) - timedelta(hours=settings.TRACES_RETENTION_HOURS)
    traces, _ = Trace.objects.filter(created__lt=cutoff).delete()
    spans, _ = Span.objects.filter(start__lt=cutoff).delete()
    return traces, spans
