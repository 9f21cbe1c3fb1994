"""POST /v1/traces on the gateway's ASGI path: OTLP/HTTP in JSON and protobuf, the key's scope,
answers per the spec (partial success, 400, 413), and only kept traces stored."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from traces.models import Span
from traces.tests.test_otlp_decode import vllm_request_json

HEAD_KEPT = "0123456789abcdef" + "0" * 15 + "1"  # lower half near 0: under any head rate
NOT_KEPT = "0123456789abcdef" + "f" * 16


async def post(body: bytes, *, kind: str, secret: str | None) -> tuple[int, str, bytes]:
    from gateway.app import application

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-type", kind.encode())]
    if secret:
        headers.append((b"authorization", f"Bearer {secret}".encode()))
    scope = {
        "type": "http",
        "path": "/v1/traces",
        "method": "POST",
        "headers": headers,
        "client": ("127.0.0.1", 1),
    }
    await application(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    content_type = dict(start["headers"])[b"content-type"].decode()
    return (
        start["status"],
        content_type,
        b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"),
    )


def spans_of(trace_id: str, count: int = 1) -> dict[str, Any]:
    body = vllm_request_json(traceId=trace_id)
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.extend(dict(spans[0], spanId=f"{i + 1:016x}") for i in range(1, count))
    return body


@pytest.mark.django_db(transaction=True)
def test_receiver_stores_kept_traces_in_json_and_protobuf_and_refuses_what_it_must(inference_key, settings):
    settings.TRACES_HEAD_SAMPLE_RATE = 0.01
    telemetry = inference_key(name="engines", purpose="telemetry").secret
    production = inference_key(name="app").secret
    from traces.services import kept_key

    def run() -> list[tuple[int, str, bytes]]:
        async def go() -> list[tuple[int, str, bytes]]:
            from keys import limits

            tail = "fedcba9876543210" + "e" * 16  # not head-kept, marked kept by the gateway (tail)
            limits.client().set(kept_key(tail), b"1", ex=60)
            mixed = spans_of(HEAD_KEPT, 2)
            mixed["resourceSpans"] += spans_of(NOT_KEPT)["resourceSpans"] + spans_of(tail)["resourceSpans"]
            bad_span = spans_of(HEAD_KEPT)
            bad_span["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "nothex"
            request = trace_service_pb2.ExportTraceServiceRequest()
            span = request.resource_spans.add().scope_spans.add().spans.add()
            span.trace_id, span.span_id, span.name = bytes.fromhex(HEAD_KEPT), b"\x07" * 8, "llm_request"
            return [
                await post(json.dumps(mixed).encode(), kind="application/json", secret=telemetry),
                await post(request.SerializeToString(), kind="application/x-protobuf", secret=telemetry),
                await post(json.dumps(bad_span).encode(), kind="application/json", secret=telemetry),
                await post(b"{nope", kind="application/json", secret=telemetry),
                await post(b"\xff\xff", kind="application/x-protobuf", secret=telemetry),
                await post(b"{}", kind="application/json", secret=None),
                await post(b"{}", kind="application/json", secret=production),
                await post(b"{}", kind="text/plain", secret=telemetry),
                await post(
                    b"x" * (settings.TRACES_MAX_BODY_BYTES + 1), kind="application/json", secret=telemetry
                ),
            ]

        return asyncio.run(go())

    mixed, pb, partial, bad_json, bad_pb, no_key, wrong_key, plain, huge = run()
    assert mixed == (200, "application/json", b"{}")
    assert pb[:2] == (200, "application/x-protobuf")
    assert trace_service_pb2.ExportTraceServiceResponse.FromString(pb[2]).partial_success.rejected_spans == 0
    assert partial[0] == 200
    assert json.loads(partial[2])["partialSuccess"]["rejectedSpans"] == "1"
    assert bad_json[0] == 400 and "not valid JSON" in json.loads(bad_json[2])["message"]
    assert bad_pb[:2] == (400, "application/x-protobuf") and b"not a protobuf" in bad_pb[2]
    assert no_key[0] == 401 and "telemetry purpose" in json.loads(no_key[2])["message"]
    assert wrong_key[0] == 403 and "traces:write" in json.loads(wrong_key[2])["message"]
    assert plain[0] == 415 and huge[0] == 413
    stored = sorted(Span.objects.values_list("trace_id", "name", "service_name", "instance"))
    assert [s[0] for s in stored] == [HEAD_KEPT] * 3 + ["fedcba9876543210" + "e" * 16]
    assert ("0123456789abcdef" + "0" * 15 + "1", "llm_request", "vllm", "qwen-decode-0") in stored
    assert not Span.objects.filter(trace_id=NOT_KEPT).exists()  # sampled out: dropped
