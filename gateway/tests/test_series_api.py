"""The gateway's records charted: the SQL selector, its REST endpoints and the pages that draw them."""

from __future__ import annotations

import math
import time
import uuid
from datetime import UTC, datetime

import pytest

from gateway import series
from gateway.models import BreakerEvent, GatewayRequest
from gateway.selectors import gateway_series

STEP = 10


@pytest.fixture
def topology(db, admin_user):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    return topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)


@pytest.fixture
def t0() -> float:
    """A bucket-aligned instant ten minutes ago."""
    return math.floor(time.time() / 60) * 60 - 600.0


def record(
    topology,
    at: float,
    *,
    backend="cluster",
    status=200,
    ttft=None,
    latency=100.0,
    key_id=None,
    stream=None,
    probe=False,
):
    """A record; streamed when it has a TTFT unless told."""
    return GatewayRequest(
        stream=ttft is not None if stream is None else stream,
        probe=probe,
        created=datetime.fromtimestamp(at, tz=UTC),
        key_id=key_id,
        model="Qwen/Qwen3-0.6B",
        topology=topology,
        endpoint="chat/completions",
        backend=backend,
        status=status,
        ttft_ms=ttft,
        latency_ms=latency,
    )


@pytest.fixture
def traffic(topology, t0):
    """Bucket 0: 4 cluster answers and a 502; bucket 2: the fallback serves 2; bucket 3: a 401."""
    key = uuid.uuid4()
    GatewayRequest.objects.bulk_create(
        [
            record(topology, t0 + 1, ttft=10.0, latency=100.0, key_id=key),
            record(topology, t0 + 2, ttft=20.0, latency=200.0, key_id=key),
            record(topology, t0 + 3, ttft=30.0, latency=300.0),
            record(topology, t0 + 9.5, ttft=40.0, latency=400.0),
            record(topology, t0 + 4, status=502, latency=60_000.0),
            record(topology, t0 + 21, backend="fallback", ttft=50.0, latency=500.0, key_id=key),
            record(topology, t0 + 22, backend="fallback", ttft=70.0, latency=700.0),
            record(topology, t0 + 31, backend="none", status=401, latency=0.4),
            record(topology, t0 - 1, latency=1.0),  # before the window
            record(topology, t0 + 60, latency=1.0),  # at its end (excluded)
        ]
    )
    event = BreakerEvent.objects.create(topology=topology, state="open", reason="cannot connect")
    BreakerEvent.objects.filter(pk=event.pk).update(created=datetime.fromtimestamp(t0 + 20.5, tz=UTC))
    return key


def test_the_sql_buckets_counts_rates_and_quantiles(topology, t0, traffic):
    out = gateway_series(topology_id=topology.pk, start=t0, end=t0 + 60, step=STEP)
    assert out["timestamps"] == [t0 + i * STEP for i in range(6)]
    assert out["series"]["rps.cluster"] == [0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert out["series"]["rps.fallback"] == [0.0, 0.0, 0.2, 0.0, 0.0, 0.0]
    assert out["series"]["rps.none"] == [0.0, 0.0, 0.0, 0.1, 0.0, 0.0]
    assert out["series"]["share.errors"] == [0.2, None, 0.0, 0.0, None, None]
    assert out["series"]["share.refused"] == [0.0, None, 0.0, 1.0, None, None]
    # the 502 is left out of the quantiles: p50 of 100..400 ms is 250, p95 is 385
    assert out["series"]["latency.p50"][0] == pytest.approx(250.0)
    assert out["series"]["latency.p95"][0] == pytest.approx(385.0)
    assert out["series"]["ttft.p50"][:4] == [pytest.approx(25.0), None, pytest.approx(60.0), None]
    assert out["totals"]["requests"] == 8.0 and out["totals"]["error_share"] == pytest.approx(1 / 8)
    kinds = [(m["kind"], m["ts"] - t0) for m in out["events"]]
    assert kinds == [("fallback", 20.0), ("breaker_open", 20.5)]


def test_the_sql_agrees_with_the_python_aggregation(topology, t0, traffic):
    """Standalone mode (SQLite) aggregates in Python: both must draw the same charts."""
    rows = GatewayRequest.objects.filter(
        topology=topology,
        created__gte=datetime.fromtimestamp(t0, tz=UTC),
        created__lt=datetime.fromtimestamp(t0 + 60, tz=UTC),
    ).values_list(*series.RECORD_FIELDS)
    python = series.build(series.aggregate(rows, first=t0, step=STEP), first=t0, end=t0 + 60, step=STEP)
    sql = gateway_series(topology_id=topology.pk, start=t0, end=t0 + 60, step=STEP)
    for name in series.SERIES:
        assert sql["series"][name] == pytest.approx(python["series"][name]), name


def test_the_sql_charts_verification_apart_and_ttft_of_streams_only(topology, t0):
    GatewayRequest.objects.bulk_create(
        [
            record(topology, t0 + 1, ttft=10.0, latency=100.0),
            record(topology, t0 + 2, ttft=900.0, latency=900.0, stream=False),  # an older whole answer
            record(topology, t0 + 3, latency=400.0, stream=False),
            record(topology, t0 + 4, ttft=30.0, latency=300.0, probe=True),
            record(topology, t0 + 5, backend="fallback", ttft=50.0, latency=500.0, probe=True),
            record(topology, t0 + 21, latency=700.0, stream=False),  # whole answers only: no TTFT
        ]
    )
    out = gateway_series(topology_id=topology.pk, start=t0, end=t0 + 30, step=STEP)
    assert out["series"]["rps.cluster"] == [0.3, 0.0, 0.1]
    assert out["series"]["rps.fallback"] == [0.0, 0.0, 0.0]
    assert out["series"]["rps.verification"] == [0.2, 0.0, 0.0]
    assert out["series"]["ttft.p50"] == [pytest.approx(30.0), None, None]  # of 10, 30, 50
    assert out["series"]["latency.p50"] == [pytest.approx(400.0), None, pytest.approx(700.0)]
    assert out["totals"]["requests"] == 6.0 and out["totals"]["verification"] == 2.0
    assert out["events"] == []


def test_a_key_sees_only_its_own_requests(topology, t0, traffic):
    out = gateway_series(key_id=str(traffic), start=t0, end=t0 + 60, step=STEP)
    assert out["totals"]["requests"] == 3.0
    assert out["series"]["rps.cluster"][0] == 0.2 and out["series"]["rps.fallback"][2] == 0.1
    assert [m["kind"] for m in out["events"]] == ["fallback", "breaker_open"]  # its topology's breaker


def test_an_unaligned_start_reads_the_whole_first_bucket(topology, t0, traffic):
    out = gateway_series(topology_id=topology.pk, start=t0 + 7, end=t0 + 30, step=STEP)
    assert out["start"] == t0 and out["series"]["rps.cluster"][0] == 0.5


def test_the_window_query_uses_an_index(topology, traffic):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        queries = (
            (
                "SELECT count(*) FROM gateway_gatewayrequest WHERE topology_id = %s "
                "AND created >= now() - interval '1 hour' AND created < now()",
                topology.pk,
            ),
            (
                "SELECT count(*) FROM gateway_gatewayrequest WHERE key_id = %s "
                "AND created >= now() - interval '1 hour' AND created < now()",
                traffic,
            ),
        )
        for sql, value in queries:
            cursor.execute(f"EXPLAIN {sql}", [value])
            plan = " ".join(row[0] for row in cursor.fetchall())
            assert "Index" in plan and "Seq Scan" not in plan, plan
        cursor.execute("SET enable_seqscan = on")


@pytest.fixture
def reader(admin_user):
    from rest_framework.test import APIClient

    from keys import services

    issued = services.key_create(
        actor=admin_user,
        owner=admin_user,
        name="charts",
        purpose="automation",
        scopes=["topologies:read", "keys:read"],
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    return client


def test_api_serves_the_topology_series(reader, topology, t0, traffic):
    response = reader.get(
        f"/api/v1/topologies/{topology.pk}/gateway-series/", {"start": t0, "end": t0 + 60, "step": STEP}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["step"] == STEP and body["series"]["rps.cluster"][0] == 0.5
    assert body["events"][1]["text"] == "circuit opened: cannot connect"


def test_api_defaults_to_the_last_hour_in_about_120_buckets(reader, topology, traffic):
    body = reader.get(f"/api/v1/topologies/{topology.pk}/gateway-series/").json()
    assert body["step"] == 30 and 120 <= len(body["timestamps"]) <= 121
    assert body["totals"]["requests"] == 10.0  # every record of the fixture is within the last hour


def test_api_refuses_bad_windows_naming_the_field(reader, topology):
    path = f"/api/v1/topologies/{topology.pk}/gateway-series/"
    cases = [
        ({"start": "yesterday"}, "start", "unix seconds"),
        ({"start": 200, "end": 100}, "start", "before end"),
        ({"start": 0, "end": 86400 * 2, "step": 1}, "step", "use step ≥"),
        ({"step": 0}, "step", ""),
        # Past what a date can hold (year 10000), not a number, before the epoch: refused, never a 500.
        ({"end": 253402304400.0}, "end", "9999-12-31T23:59:59Z"),
        ({"end": "nan"}, "end", "out of range"),
        ({"start": "-inf"}, "start", "out of range"),
        ({"start": -5, "end": 100}, "start", "1970-01-01T00:00:00Z"),
    ]
    for params, field, words in cases:
        response = reader.get(path, params)
        assert response.status_code == 400, (params, response.content)
        assert field in response.content.decode() and words in response.content.decode()


def test_api_serves_a_keys_series_only_to_who_may_see_the_key(reader, api_client, viewer, admin_user, t0):
    from keys import services

    issued = services.key_create(actor=admin_user, owner=admin_user, name="app", purpose="production")
    GatewayRequest.objects.bulk_create([record(None, t0 + 5, key_id=issued.key.pk)])
    path = f"/api/v1/keys/{issued.key.pk}/gateway-series/"
    body = reader.get(path, {"start": t0, "end": t0 + 60, "step": STEP}).json()
    assert body["series"]["rps.cluster"][0] == 0.1 and body["events"] == []
    api_client.force_login(viewer)
    assert api_client.get(path).status_code == 404
    assert api_client.get(f"/api/v1/keys/{uuid.uuid4()}/gateway-series/").status_code == 404


def test_topology_page_and_key_page_carry_the_charts(client, viewer, admin_user, topology):
    from keys import services

    client.force_login(viewer)
    html = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert "data-gateway-charts" in html and f"/api/v1/topologies/{topology.pk}/gateway-series/" in html
    assert "js/gateway-charts.js" in html and 'data-window="86400"' in html
    issued = services.key_create(actor=viewer, owner=viewer, name="app", purpose="production")
    page = client.get(f"/keys/{issued.key.pk}/").content.decode()
    assert (
        "Requests with this key through the gateway" in page
        and f"/api/v1/keys/{issued.key.pk}/gateway-series/" in page
    )
