"""In a browser: a waterfall read from the cluster's Tempo and one whose store fails, the cluster page's
trace store, the hit-rate panel taking routed warm from the router's own metric, and the editor's
transfer-engine metrics fields (screenshots at 1440 and 390 px in var/screenshots/)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

import pytest

from telemetry.tests.test_browser_live import browser_type_launch_args, login
from tests.support import subprocess_env, uvicorn_server
from traces.tests.test_trace_store import GATEWAY_SPAN, START_US, TEMPO, TRACE_ID, Store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
__all__ = ["browser_type_launch_args"]
WIDTHS = ((1440, 900), (390, 844))


@pytest.fixture
def topology(operator):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    spec = preset_spec("deepseek-ascend-mooncake")
    spec = {**spec, "connector": {**spec["connector"], "transfer_metrics": True}}
    return topology_create(cluster=cluster, spec=spec, actor=operator)


def _kept_trace(topology):
    from traces.models import Span, Trace

    start = datetime.fromtimestamp(START_US / 1e6, tz=UTC)
    Trace.objects.create(
        trace_id=TRACE_ID, created=datetime.now(UTC), topology=topology, gateway_span_id=GATEWAY_SPAN,
        kept="slow", reason="TTFT 840 ms over the SLO's 500 ms", model=topology.model_name,
        endpoint="chat/completions", backend="cluster", status=200, latency_ms=1000.0,
        prompt_tokens=900, completion_tokens=20,
    )  # fmt: skip
    Span.objects.create(
        trace_id=TRACE_ID, span_id=GATEWAY_SPAN, name="gateway chat/completions",
        service_name="tandem-gateway", instance=topology.name, start=start,
        end=start + timedelta(seconds=1),
    )  # fmt: skip


def _router_window(topology):
    """The last hour: 40 requests over 10 prefix groups, the router counting 40 attempts, 10 misses."""
    from gateway.recorder import RequestRecord, _insert
    from telemetry.models import Point, Series

    now = datetime.now(UTC) - timedelta(minutes=10)
    _insert(
        [
            RequestRecord(
                created=now + timedelta(seconds=i), key_id=None, model="m", topology_id=topology.pk,
                endpoint="chat/completions", backend="cluster", status=200, error_code="",
                stream=True, prompt_tokens=500, completion_tokens=20, ttft_ms=40.0, latency_ms=90.0,
                trace_id=f"{i:032x}", prefix_group=f"{i % 10:016x}",
            )
            for i in range(40)
        ]
    )  # fmt: skip
    for name, value in (("router.match_attempts", 40.0), ("router.match_misses", 10.0)):
        series = Series.objects.create(topology=topology, name=name)
        Point.objects.create(series=series, ts=now + timedelta(seconds=50), value=value)


def test_store_waterfall_cluster_page_hit_rate_and_editor(page, operator, topology):
    from clusters.services import cluster_set_trace_store

    _kept_trace(topology)
    _router_window(topology)
    os.makedirs("var/screenshots", exist_ok=True)
    with Store() as store, uvicorn_server(subprocess_env()) as base:
        cluster_set_trace_store(cluster=topology.cluster, trace_store="tempo", trace_store_url=store.url)
        store.answer = (200, json.dumps(TEMPO).encode())
        login(page, base, operator)
        for width, height in WIDTHS:
            page.set_viewport_size({"width": width, "height": height})
            store.answer = (200, json.dumps(TEMPO).encode())
            page.goto(f"{base}/traces/{TRACE_ID}/")
            assert f"Engine spans read from Tempo at {store.url}" in page.inner_text("main")
            assert page.locator(".wf-decode").count() == 1 and "chat-decode-1" in page.inner_text("main")
            page.screenshot(path=f"var/screenshots/trace-store-waterfall-{width}.png", full_page=True)

            store.answer = (503, b"ingester unavailable")
            page.goto(f"{base}/traces/{TRACE_ID}/")
            alert = page.locator(".wf-store-error")
            assert f"Tempo at {store.url} answered HTTP 503: ingester unavailable" in alert.inner_text()
            page.screenshot(path=f"var/screenshots/trace-store-error-{width}.png", full_page=True)

            page.goto(f"{base}/clusters/{topology.cluster.pk}/")
            panel = page.locator("#trace-store")
            assert store.url in panel.inner_text()
            panel.screenshot(path=f"var/screenshots/cluster-trace-store-{width}.png")

            page.goto(f"{base}/topologies/{topology.pk}/#hit-rate")
            hit = page.locator("section", has_text="Prefix-cache hit rate, explained").last
            assert "kthena_router_prefix_cache_match_ratio" in hit.inner_text()
            hit.screenshot(path=f"var/screenshots/hit-rate-router-{width}.png")

            page.goto(f"{base}/topologies/{topology.pk}/edit/")
            field = page.locator("#f-connector-transfer_metrics")
            assert field.input_value() == "true"
            assert page.locator("#f-connector-transfer_metrics_port").input_value() == "9100"
            field.scroll_into_view_if_needed()
            page.screenshot(path=f"var/screenshots/editor-transfer-metrics-{width}.png")
