from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction

from audit.models import AuditEvent
from controlplane.broadcast import overview_group, topology_group
from telemetry import cache
from telemetry.models import LatestSnapshot, Point, Rollup, Series, TelemetryAlert
from telemetry.services import telemetry_rollup_and_prune, telemetry_store

SLOW = [0] * 10


def slow_ttft(k):
    return [*SLOW, 10 * k, 10 * k, 10 * k]  # 10 requests per interval in (0.5 s, 1.0 s]


def url(topology, suffix=""):
    return f"/api/v1/topologies/{topology.pk}/metrics/{suffix}"


def store_series(topology, build, now, count=3):
    for i in range(count):
        snapshot, _, actions = build(
            topology.pk, now - 2 * (count - i), queries=1000 + 400 * i, hits=600 + 300 * i
        )
        telemetry_store(topology=topology, snapshot=snapshot, actions=actions)
    return snapshot


def test_store_appends_one_point_per_series_and_history_reads_them(topology, build, viewer, api_client):
    now = time.time()
    store_series(topology, build, now)
    names = set(Series.objects.filter(topology=topology).values_list("name", flat=True))
    assert {
        "topology.hit_rate",
        "role.prefill.hit_rate",
        "pod.decode-0.waiting",
        "link.prefill-0.decode-0.state",
    } <= names
    assert Point.objects.filter(series__name="pod.decode-0.waiting").count() == 3

    api_client.force_authenticate(viewer)
    response = api_client.get(
        url(topology),
        {"series": "topology.hit_rate,pod.decode-0.waiting", "start": now - 60, "end": now, "step": 2},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["source"] == "raw" and body["step"] == 2
    assert all(ts % 2 == 0 for ts in body["timestamps"])
    hit_rates = [v for v in body["series"]["topology.hit_rate"] if v is not None]
    assert hit_rates == pytest.approx([0.75, 0.75])  # the first sample has no previous one: no rate
    assert [v for v in body["series"]["pod.decode-0.waiting"] if v is not None] == [1.0, 1.0, 1.0]


def test_history_with_wide_steps_averages_within_a_bucket(topology, build, viewer, api_client):
    now = time.time()
    store_series(topology, build, now, count=4)
    api_client.force_authenticate(viewer)
    response = api_client.get(
        url(topology), {"series": "pod.decode-0.waiting", "start": now - 600, "end": now + 1, "step": 600}
    )
    values = [v for v in response.json()["series"]["pod.decode-0.waiting"] if v is not None]
    assert values == [1.0] or values == [1.0, 1.0]


def test_history_validation_names_the_field_and_the_fix(topology, viewer, api_client):
    api_client.force_authenticate(viewer)
    bad = api_client.get(url(topology), {"series": "topology.nope"})
    assert bad.status_code == 400
    assert "unknown series topology.nope" in bad.json()["error"]["fields"]["series"][0]
    swapped = api_client.get(url(topology), {"series": "topology.hit_rate", "start": 200, "end": 100})
    assert "start must be before end" in swapped.json()["error"]["fields"]["start"][0]
    tiny = api_client.get(
        url(topology), {"series": "topology.hit_rate", "start": 0, "end": 86400 * 2, "step": 1}
    )
    assert "use step ≥" in tiny.json()["error"]["fields"]["step"][0]
    assert (
        api_client.get(url(topology), {"series": "topology.hit_rate", "start": "yesterday"}).status_code
        == 400
    )


def test_metrics_need_a_login_and_an_existing_topology(topology, viewer, api_client):
    assert api_client.get(url(topology), {"series": "topology.hit_rate"}).status_code == 401
    api_client.force_authenticate(viewer)
    assert api_client.get(f"/api/v1/topologies/{topology.pk + 999}/metrics/latest/").status_code == 404


def test_latest_comes_from_redis_after_commit_then_from_the_database(
    topology, build, viewer, api_client, django_capture_on_commit_callbacks
):
    api_client.force_authenticate(viewer)
    empty = api_client.get(url(topology, "latest/"))
    assert empty.status_code == 404 and empty.json()["error"]["code"] == "no_telemetry"
    with django_capture_on_commit_callbacks(execute=True):
        snapshot = store_series(topology, build, time.time(), count=1)
        assert cache.get_snapshot(topology.pk) is None  # nothing leaves before the commit
    assert cache.get_snapshot(topology.pk)["ts"] == snapshot["ts"]
    body = api_client.get(url(topology, "latest/")).json()
    assert body["ts"] == snapshot["ts"] and body["health"]["state"] == "healthy"
    assert {p["name"] for p in body["pods"]} == {"prefill-0", "decode-0"}
    assert body["links"][0]["state"] == "up"

    cache.forget(topology.pk)
    assert LatestSnapshot.objects.filter(topology=topology).exists()
    assert api_client.get(url(topology, "latest/")).json()["ts"] == snapshot["ts"]


def test_an_old_snapshot_reads_as_stale(topology, build, viewer, api_client):
    snapshot, _, _ = build(topology.pk, time.time() - 60)
    telemetry_store(topology=topology, snapshot=snapshot, actions={})
    api_client.force_authenticate(viewer)
    health = api_client.get(url(topology, "latest/")).json()["health"]
    assert health["state"] == "stale" and health["reasons"][0].startswith("no telemetry for 6")


@pytest.mark.django_db(transaction=True)
async def test_push_reaches_the_topology_and_overview_groups_only_after_commit(topology, build):
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(topology_group(topology.pk), channel)
    await layer.group_add(overview_group(), channel)

    def rolled_back() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            snapshot, _, _ = build(topology.pk, time.time())
            telemetry_store(topology=topology, snapshot=snapshot, actions={})
            raise RuntimeError("roll back")

    def committed():
        snapshot, _, _ = build(topology.pk, time.time())
        telemetry_store(topology=topology, snapshot=snapshot, actions={})
        return snapshot

    try:
        await sync_to_async(rolled_back)()
        snapshot = await sync_to_async(committed)()
        first = (await asyncio.wait_for(layer.receive(channel), 5))["payload"]
        second = (await asyncio.wait_for(layer.receive(channel), 5))["payload"]
        assert first["kind"] == "telemetry" and first["snapshot"]["ts"] == snapshot["ts"]
        assert second == {
            "kind": "overview",
            "topology_id": topology.pk,
            "health": snapshot["health"],
            "slo": snapshot["slo"],
            "hit_rate": snapshot["totals"]["hit_rate_30s"],
            "ttft_p95": snapshot["totals"]["ttft_p95"],
            "tbt_p95": snapshot["totals"]["tbt_p95"],
            "gen_tps": snapshot["totals"]["gen_tps"],
            "pods": snapshot["totals"]["pods"],
            "ready": snapshot["totals"]["ready"],
            "links_down": snapshot["totals"]["links_down"],
        }
        stored = sync_to_async(
            lambda: Point.objects.filter(series__topology=topology).values("ts").distinct().count()
        )
        assert await stored() == 1
    finally:
        await layer.group_discard(topology_group(topology.pk), channel)
        await layer.group_discard(overview_group(), channel)


def test_slo_alert_is_raised_once_audited_and_listed_then_resolved(topology, build, viewer, api_client):
    now = time.time() - 40
    raised = None
    for k in range(5):
        open_alerts = set(
            TelemetryAlert.objects.filter(resolved__isnull=True).values_list("metric", flat=True)
        )
        snapshot, _, actions = build(topology.pk, now + 2 * k, ttft=slow_ttft(k), open_alerts=open_alerts)
        telemetry_store(topology=topology, snapshot=snapshot, actions=actions)
        if actions:
            raised = snapshot
    alert = TelemetryAlert.objects.get(topology=topology)
    assert alert.metric == "ttft" and alert.is_open and alert.target_ms == 500
    assert "TTFT p95" in alert.message and "above the 500 ms SLO" in alert.message
    assert [e["kind"] for e in raised["events"]] == ["alert_raised"]
    audit = AuditEvent.objects.get(action="telemetry.alert_raised")
    assert audit.target_id == str(topology.pk) and audit.actor_label == "system"

    api_client.force_authenticate(viewer)
    listed = api_client.get(f"/api/v1/topologies/{topology.pk}/alerts/", {"state": "open"}).json()
    assert listed["results"][0]["state"] == "open" and listed["results"][0]["metric"] == "ttft"

    fast = slow_ttft(4)
    for k in range(5, 9):
        fast = [c + 10 if i >= 2 else c for i, c in enumerate(fast)]  # 10 fast requests per interval
        snapshot, _, actions = build(topology.pk, now + 2 * k, ttft=fast, open_alerts={"ttft"})
        telemetry_store(topology=topology, snapshot=snapshot, actions=actions)
    alert.refresh_from_db()
    assert alert.resolved is not None
    assert AuditEvent.objects.filter(action="telemetry.alert_resolved").count() == 1
    history = api_client.get(
        url(topology), {"series": "topology.ttft_p95", "start": now - 10, "end": time.time() + 5}
    )
    assert [e["kind"] for e in history.json()["events"]] == ["alert_raised", "alert_resolved"]


def test_rollup_keeps_minute_mean_min_max_and_prune_drops_old_raw_points(topology, viewer, api_client):
    series = Series.objects.create(topology=topology, name="topology.waiting")
    now = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)
    minute = datetime(2026, 11, 30, 11, 58, tzinfo=UTC)
    Point.objects.bulk_create(
        [
            Point(series=series, ts=minute + timedelta(seconds=s), value=v)
            for s, v in ((0, 1.0), (20, 5.0), (40, 3.0))
        ]
        + [Point(series=series, ts=now - timedelta(hours=30), value=9.0)]
    )
    counts = telemetry_rollup_and_prune(now=now)
    rollup = Rollup.objects.get(series=series, ts=minute)
    assert (rollup.avg, rollup.min, rollup.max, rollup.count) == (3.0, 1.0, 5.0, 3)
    assert counts["points_pruned"] == 1
    assert not Point.objects.filter(ts__lt=now - timedelta(hours=24)).exists()
    # idempotent: a second run changes nothing
    telemetry_rollup_and_prune(now=now)
    assert Rollup.objects.filter(series=series).count() == 1
    # long windows read rollups
    api_client.force_authenticate(viewer)
    body = api_client.get(
        url(topology),
        {
            "series": "topology.waiting",
            "start": (now - timedelta(hours=3)).isoformat(),
            "end": now.isoformat(),
        },
    ).json()
    assert body["source"] == "rollup"
    assert [v for v in body["series"]["topology.waiting"] if v is not None] == [3.0]


def test_old_rollups_are_pruned_after_thirty_days(topology):
    series = Series.objects.create(topology=topology, name="topology.ready")
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    Rollup.objects.create(series=series, ts=now - timedelta(days=31), avg=1, min=1, max=1, count=1)
    Rollup.objects.create(series=series, ts=now - timedelta(days=2), avg=1, min=1, max=1, count=1)
    assert telemetry_rollup_and_prune(now=now)["rollups_pruned"] == 1
    assert Rollup.objects.filter(series=series).count() == 1


def test_openapi_schema_documents_the_telemetry_endpoints(admin_user, api_client):
    api_client.force_authenticate(admin_user)
    schema = api_client.get("/api/v1/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    assert "/api/v1/topologies/{id}/metrics/" in paths or "/api/v1/topologies/{pk}/metrics/" in paths
    history = paths.get("/api/v1/topologies/{id}/metrics/") or paths["/api/v1/topologies/{pk}/metrics/"]
    assert {p["name"] for p in history["get"]["parameters"]} >= {"series", "start", "end", "step"}


def test_series_with_nothing_left_are_removed_and_collection_recovers_its_ids(topology, build):
    from telemetry import services

    snapshot, _, _ = build(topology.pk, time.time() - 3 * 86400)
    telemetry_store(topology=topology, snapshot=snapshot, actions={})
    remembered = {k: v for k, v in services._series_ids.items() if k[0] == topology.pk}
    now = datetime.now(tz=UTC)
    Rollup.objects.filter(series__topology=topology).delete()
    counts = telemetry_rollup_and_prune(now=now + timedelta(days=31))
    assert counts["series_removed"] > 0
    assert not Series.objects.filter(topology=topology).exists()
    # a worker that still remembers the removed ids stores the next collection anyway: the removal
    # (once committed) changed the topology's series epoch, so the remembered ids are dropped
    services._series_ids.update(remembered or {(topology.pk, "topology.waiting"): 10**9})
    cache.bump_series_epoch(topology.pk)
    snapshot, _, _ = build(topology.pk, time.time())
    telemetry_store(topology=topology, snapshot=snapshot, actions={})
    assert Point.objects.filter(series__topology=topology, series__name="topology.waiting").count() == 1
