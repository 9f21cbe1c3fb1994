"""OTLP/HTTP bodies in both encodings, and the trace keeping decision: pure, no database."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from traces import otlp, sampling

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
PARENT = "53995c3f42cd8ad8"


def vllm_request_json(**over):
    span = {
        "traceId": TRACE,
        "spanId": SPAN,
        "parentSpanId": PARENT,
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": 1700000000500000000,
        "attributes": [
            {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.01}},
            {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "120"}},
            {"key": "gen_ai.request.id", "value": {"stringValue": "chatcmpl-1"}},
            {"key": "flags", "value": {"arrayValue": {"values": [{"boolValue": True}]}}},
        ],
        "status": {"code": 0},
    } | over
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "vllm"}},
                        {"key": "service.instance.id", "value": {"stringValue": "qwen-decode-0"}},
                    ]
                },
                "scopeSpans": [{"scope": {"name": "vllm"}, "spans": [span]}],
            }
        ]
    }


def test_it_reads_vllms_span_from_json():
    decoded = otlp.decode(json.dumps(vllm_request_json()).encode(), otlp.JSON)
    assert decoded.rejected == 0
    (span,) = decoded.spans
    assert (span.trace_id, span.span_id, span.parent_span_id) == (TRACE, SPAN, PARENT)
    assert (span.name, span.service_name, span.instance, span.kind) == (
        "llm_request",
        "vllm",
        "qwen-decode-0",
        2,
    )
    assert span.end_ns - span.start_ns == 500_000_000
    assert span.attributes == {
        "gen_ai.latency.time_in_queue": 0.01,
        "gen_ai.usage.prompt_tokens": 120,
        "gen_ai.request.id": "chatcmpl-1",
        "flags": [True],
    }


def test_it_reads_the_same_span_from_protobuf():
    request = trace_service_pb2.ExportTraceServiceRequest()
    group = request.resource_spans.add()
    kv = group.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "vllm"
    span = group.scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes.fromhex(TRACE), bytes.fromhex(SPAN)
    span.parent_span_id, span.name, span.kind = bytes.fromhex(PARENT), "llm_request", 2
    span.start_time_unix_nano, span.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_000_400_000_000
    attr = span.attributes.add()
    attr.key, attr.value.double_value = "gen_ai.latency.e2e", 0.4
    decoded = otlp.decode(request.SerializeToString(), otlp.PROTOBUF)
    (got,) = decoded.spans
    assert (got.trace_id, got.parent_span_id, got.service_name) == (TRACE, PARENT, "vllm")
    assert got.attributes == {"gen_ai.latency.e2e": 0.4}


def test_bad_spans_are_rejected_alone_and_counted():
    body = vllm_request_json()
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append(dict(spans[0], traceId="0" * 32))
    spans.append(dict(spans[0], spanId="xyz"))
    spans.append(dict(spans[0], endTimeUnixNano="1"))
    decoded = otlp.decode(json.dumps(body).encode(), otlp.JSON)
    assert len(decoded.spans) == 1 and decoded.rejected == 3
    assert "traceId" in decoded.problem
    answer = json.loads(otlp.success_body(otlp.JSON, rejected=3, problem=decoded.problem))
    assert answer["partialSuccess"]["rejectedSpans"] == "3"
    pb = trace_service_pb2.ExportTraceServiceResponse.FromString(
        otlp.success_body(otlp.PROTOBUF, rejected=3, problem="x")
    )
    assert pb.partial_success.rejected_spans == 3


@pytest.mark.parametrize(
    ("body", "kind", "says"),
    [
        (b"{not json", otlp.JSON, "not valid JSON"),
        (b"[1]", otlp.JSON, "JSON object"),
        (b'{"resourceSpans": 5}', otlp.JSON, "must be a list"),
        (b"\xff\xff\xff\xff", otlp.PROTOBUF, "not a protobuf"),
    ],
)
def test_a_body_that_is_no_export_request_is_refused_with_a_reason(body, kind, says):
    with pytest.raises(otlp.OtlpError, match=says):
        otlp.decode(body, kind)


def test_error_body_is_a_google_rpc_status():
    raw = otlp.error_body(otlp.PROTOBUF, code=3, message="bad")
    assert raw == b"\x08\x03\x12\x03bad"
    assert json.loads(otlp.error_body(otlp.JSON, code=3, message="bad")) == {"code": 3, "message": "bad"}


def decide(**over):
    args = (
        dict(
            trace_id="f" * 32,  # lower half all f: never head-sampled below rate 1
            status=200,
            backend="cluster",
            latency_ms=300.0,
            ttft_ms=100.0,
            completion_tokens=10,
            slo_ttft_ms=1000,
            slo_tbt_ms=50,
            head_rate=0.01,
        )
        | over
    )
    return sampling.decide(**args)


def test_tail_keeps_failed_slow_and_fallback_requests_and_head_a_fraction():
    assert decide() == ("", "")
    assert decide(status=503)[0] == "failed"
    assert decide(backend="fallback")[0] == "failed"
    assert decide(ttft_ms=1500.0) == ("slow", "TTFT 1,500 ms over the SLO's 1,000 ms")
    # total budget: 1000 + 50 x 9 = 1450 ms
    assert decide(ttft_ms=None, latency_ms=1400.0) == ("", "")
    assert decide(ttft_ms=None, latency_ms=1500.0)[0] == "slow"
    assert decide(trace_id="a" * 16 + "0" * 16)[0] == "head"
    assert decide(status=404, ttft_ms=5000.0) == ("", "")  # a client error is neither slow nor failed


def test_head_sampling_keeps_about_its_fraction():
    import os

    kept = sum(sampling.head_kept(os.urandom(16).hex(), 0.1) for _ in range(20_000))
    assert 1_700 < kept < 2_300
    assert sampling.head_kept("1" * 32, 1.0) and not sampling.head_kept("1" * 32, 0.0)
