"""OTLP/HTTP trace export requests in, rows out; answers in the caller's encoding. Pure functions.

Both encodings of the OTLP specification (https://opentelemetry.io/docs/specs/otlp/): binary protobuf
(`application/x-protobuf`, opentelemetry-proto's ExportTraceServiceRequest) and its JSON mapping
(`application/json`: lowerCamelCase fields, trace and span ids as hex, 64-bit integers as strings or
numbers, enums as numbers). A span that cannot be stored (a bad id, an end before its start) is
rejected alone and counted in the answer's partial success.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_HEX = frozenset("0123456789abcdef")
INSTANCE_KEYS = ("service.instance.id", "k8s.pod.name", "host.name")
ROLE = "tandem.role"


class OtlpError(Exception):
    """The body is not an export request (400)."""


@dataclass(frozen=True)
class SpanIn:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    service_name: str
    instance: str
    kind: int
    start_ns: int
    end_ns: int
    status_code: int
    status_message: str
    attributes: dict[str, Any]


@dataclass
class Decoded:
    spans: list[SpanIn]
    rejected: int = 0
    problem: str = ""

    def reject(self, why: str) -> None:
        self.rejected += 1
        self.problem = self.problem or why


def _hex_id(value: str, size: int) -> str | None:
    value = value.lower()
    if len(value) != size or not _HEX.issuperset(value) or value == "0" * size:
        return None
    return value


def _accept(out: Decoded, span: SpanIn) -> None:
    if span.end_ns < span.start_ns:
        out.reject(f"span {span.span_id} ends before it starts")
        return
    out.spans.append(span)


def _instance(resource: dict[str, Any]) -> str:
    for key in INSTANCE_KEYS:
        value = resource.get(key)
        if value:
            return str(value)[:128]
    return ""


def _role(spans: list[SpanIn], resource: dict[str, Any]) -> None:
    """The engine's role from its resource (Tandem's manifests set `tandem.role`), kept on its spans."""
    role = resource.get(ROLE)
    if role:
        for span in spans:
            span.attributes.setdefault(ROLE, str(role))


# ---- JSON -----------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_json_value(v) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return _json_attributes((value["kvlistValue"] or {}).get("values"))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _json_attributes(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {str(a["key"]): _json_value(a.get("value")) for a in items if isinstance(a, dict) and "key" in a}


def decode_json(body: bytes) -> Decoded:
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        raise OtlpError("The body is not valid JSON: send an OTLP ExportTraceServiceRequest.") from None
    if not isinstance(request, dict):
        raise OtlpError(
            "The body must be a JSON object with `resourceSpans` (OTLP ExportTraceServiceRequest)."
        )
    groups = request.get("resourceSpans", [])
    if not isinstance(groups, list):
        raise OtlpError("`resourceSpans` must be a list.")
    out = Decoded([])
    for group in groups:
        if not isinstance(group, dict):
            raise OtlpError("Each of `resourceSpans` must be an object with `resource` and `scopeSpans`.")
        resource = _json_attributes((group.get("resource") or {}).get("attributes"))
        service, instance = str(resource.get("service.name") or "")[:128], _instance(resource)
        before = len(out.spans)
        for scope in group.get("scopeSpans") or []:
            for span in (scope or {}).get("spans") or []:
                _json_span(out, span, service, instance)
        _role(out.spans[before:], resource)
    return out


def _json_span(out: Decoded, span: Any, service: str, instance: str) -> None:
    if not isinstance(span, dict):
        out.reject("a span is not an object")
        return
    trace_id = _hex_id(str(span.get("traceId", "")), 32)
    span_id = _hex_id(str(span.get("spanId", "")), 16)
    if trace_id is None or span_id is None:
        out.reject("a span has no valid traceId (32 hex) or spanId (16 hex)")
        return
    parent = str(span.get("parentSpanId") or "")
    status = span.get("status") or {}
    try:
        start, end = int(span.get("startTimeUnixNano", 0)), int(span.get("endTimeUnixNano", 0))
        kind, code = int(span.get("kind", 0)), int(status.get("code", 0))
    except (TypeError, ValueError):
        out.reject(f"span {span_id} has a time, kind or status that is not a number")
        return
    _accept(
        out,
        SpanIn(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=_hex_id(parent, 16) or "" if parent else "",
            name=str(span.get("name", ""))[:128],
            service_name=service,
            instance=instance,
            kind=kind,
            start_ns=start,
            end_ns=end,
            status_code=code,
            status_message=str(status.get("message", ""))[:200],
            attributes=_json_attributes(span.get("attributes")),
        ),
    )


# ---- protobuf -------------------------------------------------------------------------------------


def _pb_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def decode_protobuf(body: bytes) -> Decoded:
    try:
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError, ValueError):
        raise OtlpError("The body is not a protobuf ExportTraceServiceRequest.") from None
    out = Decoded([])
    for group in request.resource_spans:
        resource = {kv.key: _pb_value(kv.value) for kv in group.resource.attributes}
        service, instance = str(resource.get("service.name") or "")[:128], _instance(resource)
        before = len(out.spans)
        for scope in group.scope_spans:
            for span in scope.spans:
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                if _hex_id(trace_id, 32) is None or _hex_id(span_id, 16) is None:
                    out.reject("a span has no valid trace_id (16 bytes) or span_id (8 bytes)")
                    continue
                _accept(
                    out,
                    SpanIn(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=span.parent_span_id.hex() if len(span.parent_span_id) == 8 else "",
                        name=span.name[:128],
                        service_name=service,
                        instance=instance,
                        kind=int(span.kind),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        status_code=int(span.status.code),
                        status_message=span.status.message[:200],
                        attributes={kv.key: _pb_value(kv.value) for kv in span.attributes},
                    ),
                )
        _role(out.spans[before:], resource)
    return out


def decode(body: bytes, content_type: str) -> Decoded:
    return decode_protobuf(body) if content_type == PROTOBUF else decode_json(body)


# ---- answers --------------------------------------------------------------------------------------


def success_body(content_type: str, *, rejected: int, problem: str) -> bytes:
    """ExportTraceServiceResponse: empty when all was accepted, else its partial_success."""
    if content_type == PROTOBUF:
        answer = trace_service_pb2.ExportTraceServiceResponse()
        if rejected:
            answer.partial_success.rejected_spans = rejected
            answer.partial_success.error_message = problem
        return answer.SerializeToString()
    if not rejected:
        return b"{}"
    return json.dumps({"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": problem}}).encode()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def error_body(content_type: str, *, code: int, message: str) -> bytes:
    """google.rpc.Status (code, message), the body OTLP/HTTP gives a refused request."""
    if content_type == PROTOBUF:
        text = message.encode()
        return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text
    return json.dumps({"code": code, "message": message}).encode()
