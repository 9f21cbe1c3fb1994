"""Engine spans from a cluster's own trace store, by trace id: Jaeger's or Tempo's HTTP query API.

At fleet scale the engines' spans go to an existing Jaeger or Tempo instead of Tandem's receiver; the
waterfall then reads them from there (``Cluster.trace_store``, ``trace_store_url``,
``trace_store_token``), as telemetry reads metrics from a cluster's Prometheus.

* **Jaeger** ``GET {url}/api/traces/{traceID}`` answers ``{"data": [Trace], "errors": [...]}``
  (jaegertracing/jaeger ``cmd/query/app/http_handler.go``, ``structuredResponse``); a Trace is
  ``{traceID, spans, processes}``, a span ``{traceID, spanID, operationName, references:
  [{refType: CHILD_OF|FOLLOWS_FROM, traceID, spanID}], startTime, duration (µs), tags: [{key, type,
  value}], processID}``, a process ``{serviceName, tags}`` (``model/json/model.go``). A missing trace
  is a 404 with ``errors``.
* **Tempo** ``GET {url}/api/traces/{traceID}`` (``Accept: application/json``) answers OTLP JSON with
  the resource spans under ``batches`` (grafana/tempo ``pkg/tempopb``, ``MarshalToJSONV1``: gogo
  ``jsonpb``, so ids are base64 and enums are names such as ``SPAN_KIND_SERVER``,
  ``STATUS_CODE_ERROR``); a missing trace is a 404.

Parsing is pure (``jaeger_spans``, ``tempo_spans``); ``fetch`` is the one network call, and every way
it can fail is a ``StoreError`` whose message names the store and what to check.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3

from traces.otlp import INSTANCE_KEYS, ROLE, OtlpError, decode_json
from traces.waterfall import SpanRow

KINDS = ("jaeger", "tempo")
LABELS = {"jaeger": "Jaeger", "tempo": "Tempo"}
TIMEOUT_S = 5.0
MAX_BYTES = 16 * 1024 * 1024
_http = urllib3.PoolManager(num_pools=4, retries=False)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class StoreError(Exception):
    """The trace store could not answer; str() says which store, why, and what to check."""


@dataclass(frozen=True)
class StoreSettings:
    kind: str  # jaeger | tempo
    url: str
    token: str = ""

    @property
    def label(self) -> str:
        return f"{LABELS.get(self.kind, self.kind)} at {self.url}"


# ---- Jaeger ---------------------------------------------------------------------------------------


def _tag_value(tag: dict[str, Any]) -> Any:
    value = tag.get("value")
    kind = tag.get("type")
    try:
        if kind == "int64":
            return int(value)  # type: ignore[arg-type]
        if kind == "float64":
            return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return value
    if kind == "bool":
        return value in (True, "true")
    return value


def _tags(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {str(t["key"]): _tag_value(t) for t in items if isinstance(t, dict) and "key" in t}


def _micros(value: Any) -> datetime:
    return _EPOCH + timedelta(microseconds=int(value))


def jaeger_spans(doc: Any) -> list[SpanRow]:
    """Spans of a Jaeger ``/api/traces/{id}`` answer (pure); raises ValueError on another shape."""
    if not isinstance(doc, dict) or not isinstance(doc.get("data") or [], list):
        raise ValueError("not a Jaeger query answer (no `data` list)")
    rows: list[SpanRow] = []
    for trace in doc.get("data") or []:
        if not isinstance(trace, dict):
            raise ValueError("a trace in `data` is not an object")
        processes = trace.get("processes") or {}
        for span in trace.get("spans") or []:
            process = processes.get(span.get("processID")) or {}
            resource = _tags(process.get("tags"))
            tags = _tags(span.get("tags"))
            if ROLE in resource:
                tags.setdefault(ROLE, resource[ROLE])
            refs = [r for r in span.get("references") or [] if isinstance(r, dict)]
            parent = next((r for r in refs if r.get("refType") == "CHILD_OF"), refs[0] if refs else {})
            error = tags.get("otel.status_code") == "ERROR" or tags.get("error") is True
            start = _micros(span["startTime"])
            rows.append(
                SpanRow(
                    span_id=str(span["spanID"]).lower().zfill(16),
                    parent_span_id=str(parent.get("spanID") or "").lower(),
                    name=str(span.get("operationName", ""))[:128],
                    service_name=str(process.get("serviceName") or "")[:128],
                    instance=next((str(resource[k]) for k in INSTANCE_KEYS if resource.get(k)), ""),
                    start=start,
                    end=start + timedelta(microseconds=int(span.get("duration") or 0)),
                    status_code=2 if error else 0,
                    attributes=tags,
                )
            )
    return rows


# ---- Tempo ----------------------------------------------------------------------------------------


def _id(value: Any, size: int) -> str:
    """An id as lower-case hex: hex as given (OTLP/JSON), or base64 as gogo jsonpb writes bytes."""
    text = str(value or "")
    if len(text) == size and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text
    return raw.hex().rjust(size, "0") if raw else ""


def _normalised(span: Any) -> Any:
    if not isinstance(span, dict):
        return span
    span = dict(span)
    span["traceId"] = _id(span.get("traceId"), 32)
    span["spanId"] = _id(span.get("spanId"), 16)
    if span.get("parentSpanId"):
        span["parentSpanId"] = _id(span["parentSpanId"], 16)
    if isinstance(span.get("kind"), str):
        span["kind"] = _SPAN_KINDS.get(span["kind"], 0)
    status = span.get("status")
    if isinstance(status, dict) and isinstance(status.get("code"), str):
        span["status"] = {**status, "code": _STATUS.get(status["code"], 0)}
    return span


def tempo_spans(doc: Any) -> list[SpanRow]:
    """Spans of a Tempo ``/api/traces/{id}`` answer (pure); raises ValueError on another shape."""
    if not isinstance(doc, dict):
        raise ValueError("not a Tempo trace (not a JSON object)")
    groups = doc.get("batches", doc.get("resourceSpans"))
    if not isinstance(groups, list):
        raise ValueError("not a Tempo trace (no `batches` list)")
    request = {
        "resourceSpans": [
            {
                **group,
                "scopeSpans": [
                    {**scope, "spans": [_normalised(s) for s in (scope or {}).get("spans") or []]}
                    for scope in group.get("scopeSpans", group.get("instrumentationLibrarySpans")) or []
                ],
            }
            for group in groups
            if isinstance(group, dict)
        ]
    }
    try:
        decoded = decode_json(json.dumps(request).encode())
    except OtlpError as error:
        raise ValueError(str(error)) from None
    return [
        SpanRow(
            span_id=s.span_id,
            parent_span_id=s.parent_span_id,
            name=s.name,
            service_name=s.service_name,
            instance=s.instance,
            start=_EPOCH + timedelta(microseconds=s.start_ns / 1000),
            end=_EPOCH + timedelta(microseconds=s.end_ns / 1000),
            status_code=s.status_code,
            attributes=s.attributes,
        )
        for s in decoded.spans
    ]


# ---- the query ------------------------------------------------------------------------------------


def fetch(settings: StoreSettings, trace_id: str, *, timeout_s: float = TIMEOUT_S) -> list[SpanRow]:
    """The trace's spans in the store ([] when it holds none); a StoreError names any failure."""
    url = f"{settings.url.rstrip('/')}/api/traces/{trace_id}"
    headers = {"Accept": "application/json", "User-Agent": "tandem-controlplane"}
    if settings.token:
        headers["Authorization"] = f"Bearer {settings.token}"
    try:
        response = _http.request(
            "GET", url, headers=headers, timeout=urllib3.Timeout(total=timeout_s), preload_content=False
        )
        body = response.read(MAX_BYTES + 1)
        response.release_conn()
    except urllib3.exceptions.NewConnectionError as error:  # before TimeoutError: urllib3 derives it so
        raise StoreError(f"{settings.label} unreachable: {error.__class__.__name__}: {error}") from None
    except urllib3.exceptions.TimeoutError:
        raise StoreError(f"{settings.label} did not answer within {timeout_s:.0f} s") from None
    except (urllib3.exceptions.HTTPError, OSError) as error:
        why = getattr(error, "reason", None) or error
        raise StoreError(f"{settings.label} unreachable: {why}") from None
    if response.status == 404:
        return []
    if response.status in (401, 403):
        raise StoreError(
            f"{settings.label} answered HTTP {response.status}: check the cluster's trace_store_token"
        )
    if response.status != 200:
        text = body[:200].decode("utf-8", errors="replace").strip()
        raise StoreError(f"{settings.label} answered HTTP {response.status}" + (f": {text}" if text else ""))
    if len(body) > MAX_BYTES:
        raise StoreError(f"{settings.label} answered more than {MAX_BYTES // 2**20} MiB for one trace")
    try:
        doc = json.loads(body)
        return jaeger_spans(doc) if settings.kind == "jaeger" else tempo_spans(doc)
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise StoreError(f"{settings.label} answered something that is not a trace: {error}") from None
