"""Real gateway records (written by the recorder's COPY) and kept traces: the breakdown, the trace
export and the import endpoint, over the API and on the topology page."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from gateway.prefixgroup import prefix_group
from gateway.recorder import RequestRecord, _insert
from workload.tests.test_tracefile import MOONCAKE
from workload.tracefile import parse

PROMPTS = [f"You are the support agent for product line {i}. Be brief." for i in range(3)]


@pytest.fixture
def traffic(topology):  # type: ignore[no-untyped-def]
    """200 requests, 60 % of them with one of three system prompts; each kept trace's engine span on
    one of 64 prefill pods in turn (a router that ignores prefixes)."""
    from traces.models import Span, Trace

    rng = random.Random(3)
    now = datetime.now(UTC) - timedelta(minutes=30)
    records = []
    for i in range(200):
        system = rng.choice(PROMPTS) if rng.random() < 0.6 else f"One-off instructions {i}."
        body = {
            "model": "m",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "q"}],
        }
        records.append(
            RequestRecord(
                created=now + timedelta(seconds=i),
                key_id=None,
                model="m",
                topology_id=topology.pk,
                endpoint="chat/completions",
                backend="cluster",
                status=200,
                error_code="",
                stream=True,
                prompt_tokens=100 + i,
                completion_tokens=20,
                ttft_ms=50.0,
                latency_ms=300.0,
                trace_id=f"{i:032x}",
                prefix_group=prefix_group(body),
            )
        )
    _insert(records)
    from gateway.models import GatewayRequest

    rows = list(GatewayRequest.objects.filter(topology=topology))
    Trace.objects.bulk_create(
        Trace(
            trace_id=row.trace_id, created=row.created, topology=topology, gateway_request=row,
            gateway_span_id="1" * 16, kept="slow", model="m", endpoint="chat/completions", backend="cluster",
            status=200, latency_ms=300.0,
        )
        for row in rows
    )  # fmt: skip
    Span.objects.bulk_create(
        Span(
            trace_id=row.trace_id, span_id=row.trace_id[16:], name="llm_request",
            instance=f"prefill-{int(row.trace_id, 16) % 64}", start=row.created,
            end=row.created + timedelta(milliseconds=200),
        )
        for row in rows
    )  # fmt: skip
    return records


def test_prefix_blind_routing_is_named_the_loss_and_the_trace_round_trips(
    api_client, viewer, client, topology, traffic
) -> None:  # type: ignore[no-untyped-def]
    api_client.force_authenticate(viewer)
    answer = api_client.get(f"/api/v1/topologies/{topology.pk}/hit-rate/")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["requests"] == 200 and abs(body["reuse"] - 0.6) < 0.08
    assert body["routed_source"] == "traces" and body["routed_warm"] < 0.6
    assert body["verdict"] == "routing" and "routing is the loss" in body["sentence"]

    exported = api_client.get(f"/api/v1/topologies/{topology.pk}/request-trace/")
    assert exported.status_code == 200 and exported["Content-Type"].startswith("text/plain")
    chosen, requests = parse(exported.content.decode())
    assert chosen == "tandem" and len(requests) == 200
    assert requests[0].arrival_ms == 0 and requests[-1].arrival_ms == 199_000
    assert [r.prefix_group for r in requests] == [r.prefix_group for r in traffic]

    client.force_login(viewer)
    page = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert "Prefix-cache hit rate, explained" in page and "routing is the loss" in page


def test_import_reads_a_mooncake_file_and_names_the_bad_line(api_client, viewer) -> None:  # type: ignore[no-untyped-def]
    api_client.force_authenticate(viewer)
    url = "/api/v1/workload/traces/import/"
    good = api_client.generic("POST", url, MOONCAKE.encode(), content_type="application/x-ndjson")
    assert good.status_code == 200, good.content
    assert good.json() == {
        "format": "mooncake", "requests": 2, "duration_ms": 3053, "prompt_tokens_mean": 6713.5,
        "output_tokens_mean": 39.0, "prefix_groups": 1, "reuse": 0.5,
    }  # fmt: skip
    converted = api_client.generic(
        "POST", url.replace("import", "convert"), MOONCAKE.encode(), content_type="text/plain"
    )
    assert parse(converted.content.decode())[0] == "tandem"
    bad = api_client.generic(
        "POST",
        url,
        (MOONCAKE + '{"timestamp": 1, "input_length": "x"}\n').encode(),
        content_type="text/plain",
    )
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert error["message"].startswith("line 3, input_length:") and "input_length" in error["fields"]
    not_utf8 = api_client.generic("POST", url, b"\xff\xfe", content_type="text/csv")
    assert not_utf8.status_code == 400 and "UTF-8" in not_utf8.json()["error"]["message"]
