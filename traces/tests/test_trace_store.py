"""A cluster's Jaeger or Tempo as the source of engine spans: recorded answers in each store's real shape
served by a local HTTP server (the edge), read by the waterfall when Tandem's own store has none; every
failure of the store named on the page, never a 500."""

from __future__ import annotations

import base64
import html
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from traces.store import jaeger_spans, tempo_spans

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
GATEWAY_SPAN = "00f067aa0ba902b7"
START_US = 1_764_763_200_000_000  # 2025-12-03 12:00:00 UTC, in µs

# Jaeger's /api/traces/{id}: structuredResponse (cmd/query/app/http_handler.go) around a Trace of
# model/json/model.go: spans with references, µs times, typed tags; processes with their tags.
JAEGER = {
    "data": [
        {
            "traceID": TRACE_ID,
            "spans": [
                {
                    "traceID": TRACE_ID,
                    "spanID": "b7ad6b7169203331",
                    "operationName": "llm_request",
                    "references": [{"refType": "CHILD_OF", "traceID": TRACE_ID, "spanID": GATEWAY_SPAN}],
                    "startTime": START_US + 20_000,
                    "duration": 300_000,
                    "tags": [
                        {"key": "gen_ai.latency.time_in_queue", "type": "float64", "value": 0.05},
                        {"key": "gen_ai.latency.time_in_model_prefill", "type": "float64", "value": 0.2},
                        {"key": "gen_ai.usage.completion_tokens", "type": "int64", "value": 1},
                        {"key": "span.kind", "type": "string", "value": "server"},
                    ],
                    "logs": [],
                    "processID": "p1",
                    "warnings": None,
                },
                {
                    "traceID": TRACE_ID,
                    "spanID": "c8be7c827a314442",
                    "operationName": "llm_request",
                    "references": [{"refType": "CHILD_OF", "traceID": TRACE_ID, "spanID": GATEWAY_SPAN}],
                    "startTime": START_US + 330_000,
                    "duration": 600_000,
                    "tags": [
                        {"key": "gen_ai.latency.time_in_model_decode", "type": "float64", "value": 0.5},
                        {"key": "otel.status_code", "type": "string", "value": "ERROR"},
                    ],
                    "processID": "p2",
                },
            ],
            "processes": {
                "p1": {
                    "serviceName": "chat-prefill",
                    "tags": [
                        {"key": "service.instance.id", "type": "string", "value": "chat-prefill-0"},
                        {"key": "tandem.role", "type": "string", "value": "prefill"},
                    ],
                },
                "p2": {
                    "serviceName": "chat-decode",
                    "tags": [
                        {"key": "service.instance.id", "type": "string", "value": "chat-decode-0"},
                        {"key": "tandem.role", "type": "string", "value": "decode"},
                    ],
                },
            },
            "warnings": None,
        }
    ],
    "total": 0,
    "limit": 0,
    "offset": 0,
    "errors": None,
}


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


# Tempo's /api/traces/{id}: OTLP JSON under `batches` (pkg/tempopb MarshalToJSONV1, gogo jsonpb: ids in
# base64, 64-bit integers as strings, enums by name).
TEMPO = {
    "batches": [
        {
            "resource": {
                "attributes": [
                    {"key": "service.name", "value": {"stringValue": "chat-decode"}},
                    {"key": "service.instance.id", "value": {"stringValue": "chat-decode-1"}},
                    {"key": "tandem.role", "value": {"stringValue": "decode"}},
                ]
            },
            "scopeSpans": [
                {
                    "scope": {"name": "vllm.llm_engine"},
                    "spans": [
                        {
                            "traceId": _b64(TRACE_ID),
                            "spanId": _b64("d9cf8d938b425553"),
                            "parentSpanId": _b64(GATEWAY_SPAN),
                            "name": "llm_request",
                            "kind": "SPAN_KIND_SERVER",
                            "startTimeUnixNano": str((START_US + 40_000) * 1000),
                            "endTimeUnixNano": str((START_US + 840_000) * 1000),
                            "attributes": [
                                {"key": "gen_ai.latency.time_in_queue", "value": {"doubleValue": 0.1}},
                                {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": "20"}},
                            ],
                            "status": {"code": "STATUS_CODE_OK"},
                        }
                    ],
                }
            ],
        }
    ]
}


def test_jaeger_spans_keep_parent_instance_role_times_and_errors():
    spans = {s.span_id: s for s in jaeger_spans(JAEGER)}
    prefill, decode = spans["b7ad6b7169203331"], spans["c8be7c827a314442"]
    assert (prefill.parent_span_id, prefill.instance, prefill.service_name) == (
        GATEWAY_SPAN,
        "chat-prefill-0",
        "chat-prefill",
    )
    assert (
        prefill.attributes["tandem.role"] == "prefill"
        and prefill.attributes["gen_ai.usage.completion_tokens"] == 1
    )
    assert (prefill.end - prefill.start) == timedelta(milliseconds=300)
    assert prefill.start == datetime(2025, 12, 3, 12, 0, 0, 20_000, tzinfo=UTC)
    assert decode.status_code == 2 and prefill.status_code == 0


def test_tempo_spans_read_base64_ids_string_integers_and_enum_names():
    (span,) = tempo_spans(TEMPO)
    assert (span.span_id, span.parent_span_id) == ("d9cf8d938b425553", GATEWAY_SPAN)
    assert (span.instance, span.attributes["tandem.role"]) == ("chat-decode-1", "decode")
    assert span.attributes["gen_ai.usage.completion_tokens"] == 20
    assert (span.end - span.start) == timedelta(milliseconds=800)
    hexed = {
        **TEMPO["batches"][0]["scopeSpans"][0]["spans"][0],
        "traceId": TRACE_ID,
        "spanId": "d9cf8d938b425553",
    }
    doc = {"batches": [{**TEMPO["batches"][0], "scopeSpans": [{"spans": [hexed]}]}]}
    assert tempo_spans(doc)[0].span_id == "d9cf8d938b425553"  # OTLP/JSON's hex ids read as well
    with pytest.raises(ValueError, match="no `batches`"):
        tempo_spans({"data": []})


class Store:
    """A local HTTP server answering /api/traces/{id} as told (status, body)."""

    def __init__(self) -> None:
        self.answer: tuple[int, bytes] = (404, b"")
        self.seen: list[tuple[str, str]] = []
        store = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                store.seen.append((self.path, self.headers.get("Authorization", "")))
                status, body = store.answer
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Store:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def store() -> Iterator[Store]:
    with Store() as running:
        yield running


@pytest.fixture
def kept(db, admin_user):
    """A kept trace whose engines sent their spans elsewhere: only the gateway's span is in Tandem."""
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create
    from traces.models import Span, Trace

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)
    start = datetime.fromtimestamp(START_US / 1e6, tz=UTC)
    trace = Trace.objects.create(
        trace_id=TRACE_ID, created=start, topology=topology, gateway_span_id=GATEWAY_SPAN,
        kept="slow", model="m", endpoint="chat/completions", backend="cluster", status=200,
        latency_ms=1000.0, prompt_tokens=900, completion_tokens=20,
    )  # fmt: skip
    Span.objects.create(
        trace_id=TRACE_ID, span_id=GATEWAY_SPAN, name="gateway chat/completions",
        service_name="tandem-gateway", instance="qwen", start=start, end=start + timedelta(seconds=1),
    )  # fmt: skip
    return trace, cluster


def _use(cluster, store_kind, url, token=""):
    from clusters.services import cluster_set_trace_store

    return cluster_set_trace_store(
        cluster=cluster, trace_store=store_kind, trace_store_url=url, trace_store_token=token
    )


@pytest.mark.parametrize(
    ("kind", "doc", "instances"),
    [("jaeger", JAEGER, ["chat-prefill-0", "chat-decode-0"]), ("tempo", TEMPO, ["chat-decode-1"])],
)
def test_the_waterfall_reads_the_engine_spans_from_the_clusters_store(
    client, viewer, kept, store, kind, doc, instances
):
    _, cluster = kept
    _use(cluster, kind, store.url, token="s3cret")
    store.answer = (200, json.dumps(doc).encode())
    client.force_login(viewer)
    page = client.get(f"/traces/{TRACE_ID}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert store.seen == [(f"/api/traces/{TRACE_ID}", "Bearer s3cret")]
    label = {"jaeger": "Jaeger", "tempo": "Tempo"}[kind]
    assert f"Engine spans read from {label} at {store.url}" in text
    for instance in instances:
        assert instance in text
    assert "queue" in text and "decode engine" in text


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ((500, b"backend unavailable"), "answered HTTP 500: backend unavailable"),
        ((401, b""), "answered HTTP 401: check the cluster's trace_store_token"),
        ((200, b"<html>login</html>"), "answered something that is not a trace"),
    ],
)
def test_a_failing_store_is_named_on_the_page_never_a_500(client, viewer, kept, store, answer, words):
    _, cluster = kept
    _use(cluster, "tempo", store.url)
    store.answer = answer
    client.force_login(viewer)
    page = client.get(f"/traces/{TRACE_ID}/")
    assert page.status_code == 200
    assert f"Tempo at {store.url} {words}" in html.unescape(page.content.decode())


def test_an_unreachable_store_and_a_trace_it_lacks_are_named(client, viewer, kept):
    from tests.support import closed_port

    _, cluster = kept
    url = f"http://127.0.0.1:{closed_port()}"
    _use(cluster, "jaeger", url)
    client.force_login(viewer)
    text = client.get(f"/traces/{TRACE_ID}/").content.decode()
    assert f"Jaeger at {url} unreachable" in text and 'role="alert"' in text
    with Store() as empty:  # Jaeger's 404 for a trace it does not hold
        empty.answer = (
            404,
            json.dumps({"data": None, "errors": [{"code": 404, "msg": "trace not found"}]}).encode(),
        )
        _use(cluster, "jaeger", empty.url)
        text = client.get(f"/traces/{TRACE_ID}/").content.decode()
    assert f"Jaeger at {empty.url} holds no engine span of this trace." in text


def test_the_store_is_chosen_over_the_api_with_named_mistakes_and_a_write_only_token(
    api_client, admin_user, kept
):
    _, cluster = kept
    api_client.force_authenticate(admin_user)
    url = f"/api/v1/clusters/{cluster.pk}/"
    missing = api_client.patch(url, {"trace_store": "tempo"}, format="json")
    assert missing.status_code == 400 and "trace_store_url" in missing.json()["error"]["fields"], (
        missing.json()
    )
    wrong = api_client.patch(
        url, {"trace_store": "zipkin", "trace_store_url": "http://z:9411"}, format="json"
    )
    assert wrong.status_code == 400 and "trace_store" in wrong.json()["error"]["fields"]
    bad_url = api_client.patch(
        url, {"trace_store": "jaeger", "trace_store_url": "jaeger:16686"}, format="json"
    )
    assert (
        bad_url.status_code == 400
        and "is not an http(s) URL" in bad_url.json()["error"]["fields"]["trace_store_url"][0]
    )
    body = {
        "trace_store": "jaeger",
        "trace_store_url": "http://jaeger-query:16686/",
        "trace_store_token": "t0k",
    }
    ok = api_client.patch(url, body, format="json")
    assert ok.status_code == 200, ok.json()
    assert (
        ok.json()["trace_store"] == "jaeger" and ok.json()["trace_store_url"] == "http://jaeger-query:16686"
    )
    assert "trace_store_token" not in ok.json()
    cluster.refresh_from_db()
    assert cluster.trace_store_token == "t0k"
    from audit.models import AuditEvent

    assert AuditEvent.objects.filter(action="cluster.trace_store").exists()


def test_the_cluster_page_says_where_engine_spans_are_read(client, viewer, kept):
    from django.urls import reverse

    _, cluster = kept
    client.force_login(viewer)
    page = html.unescape(client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode())
    assert "Tandem's own (its OTLP receiver keeps the spans)" in page
    _use(cluster, "tempo", "http://tempo.observability:3200", token="x")
    page = html.unescape(client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode())
    assert "reads engine spans at <code>http://tempo.observability:3200</code> with a bearer token" in page
