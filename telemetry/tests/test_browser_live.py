"""The live dashboard in a real Chromium: a sandbox topology under a shared-prefix load shows a rising
hit rate; a KV link fault turns that edge red and the health banner explains it (from the connector's
log line about Tandem's probe through the pair) while both pods stay Ready, and the links table says
where each link's state comes from and how fresh it is; when data stops the page says it is stale.
Collection is driven from the test at the configured interval (the same service the Celery task
calls); uvicorn serves the pages and websockets."""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings
from django.db import connection

from sandbox.load.runner import run_load
from telemetry import services
from telemetry.tests.test_collect_sandbox import base_url as pod_url
from telemetry.tests.test_collect_sandbox import deployed, pods_by_role
from tests.support import subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
__all__ = ["deployed"]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium", "args": CHROMIUM_ARGS}


class Collector(threading.Thread):
    """Collects one topology every interval, like the beat-driven task, until stopped."""

    def __init__(self, topology_id: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.topology_id = topology_id
        self.interval = interval
        self.halt = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        # Its own thread: Playwright's sync API keeps an event loop running in the test's thread.
        try:
            while True:
                try:
                    services.telemetry_collect(topology_id=self.topology_id)
                except Exception as error:  # surfaced by the test, never swallowed
                    self.errors.append(error)
                if self.halt.wait(self.interval):
                    break
        finally:
            connection.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(10)


def router_url(sandbox_cluster: Any, namespace: str) -> str:
    out = sandbox_cluster.kubectl("get", "modelroutes", "-n", namespace, "-o", "json")
    items = json.loads(out.stdout)["items"]
    assert items, f"no ModelRoute in {namespace}: {out.stderr}"
    url = items[0]["metadata"].get("annotations", {}).get("sandbox.tandem.io/router-url")
    assert url, f"the sandbox gave the ModelRoute no router URL: {items[0]['metadata']}"
    return str(url)


def login(page: Any, base: str, user: Any) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


# Counts the snapshots the page applied since it was (re)armed, and keeps every hit-rate value shown.
WATCH_JS = """() => {
  const root = document.getElementById('telemetry-live');
  window.__updates = 0; window.__hits = [];
  new MutationObserver(() => {
    window.__updates += 1;
    const v = parseFloat(root.querySelector('[data-kpi="hit_rate"] .kpi').dataset.value);
    if (!isNaN(v)) { window.__hits.push(v); }
  }).observe(root, {attributes: true, attributeFilter: ['data-snapshot-ts']});
}"""
RISING_JS = (
    """() => window.__hits.length >= 3 && Math.max(...window.__hits.slice(1)) >= window.__hits[0] + 0.15"""
)


def test_live_page_shows_rising_hit_rate_then_a_red_link_explained_and_stale_when_data_stops(
    page, deployed, sandbox_cluster, viewer
):
    topology, conn, namespace = deployed
    pods = pods_by_role(conn, topology)
    prefill, decode = pods["prefill"][0], pods["decode"][0]
    url = router_url(sandbox_cluster, namespace)
    interval = float(settings.TELEMETRY_INTERVAL_SECONDS)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 1000})

    collector = Collector(topology.pk, interval)
    load_errors: list[BaseException] = []

    def load() -> None:
        try:
            asyncio.run(
                run_load(
                    url,
                    topology.model_name,
                    rate=4,
                    duration=60,
                    shared_prefix_fraction=0.9,
                    prefix_tokens=1024,
                    prompt_tokens=64,
                    max_tokens=16,
                )
            )
        except Exception as error:
            load_errors.append(error)

    with uvicorn_server(subprocess_env()) as base:
        login(page, base, viewer)
        collector.start()
        try:
            page.goto(f"{base}/topologies/{topology.pk}/")
            page.wait_for_selector(f'#telemetry-live .pd-node[data-pod="{decode.name}"]')
            page.wait_for_function(
                "() => document.getElementById('telemetry-live').dataset.liveState === 'live'"
            )
            page.evaluate(WATCH_JS)
            loader = threading.Thread(target=load, daemon=True)
            loader.start()

            # A shared-prefix load: the hit rate the page shows climbs as the prefixes get cached.
            page.wait_for_function(RISING_JS, timeout=60_000, polling=500)
            hits = page.evaluate("() => window.__hits")
            assert max(hits[1:]) >= hits[0] + 0.15, hits
            assert page.locator('[data-chart="hit"] canvas').count() == 1
            edge = f'#telemetry-live line.pd-edge[data-link="{prefill.name}->{decode.name}"]'
            assert page.get_attribute(edge, "data-state") == "up"
            page.screenshot(path=str(SHOTS / "telemetry-topology-live.png"), full_page=True)

            # The silent break: both pods Ready, KV transfers over one link fail.
            fault = requests.post(
                f"{pod_url(decode)}/sandbox/faults",
                json={"kind": "link_down", "peer": prefill.name},
                timeout=5,
            )
            assert fault.status_code in (200, 201), fault.text
            page.evaluate("() => { window.__updates = 0; }")
            page.wait_for_selector(f'{edge}[data-state="down"]', state="attached", timeout=30_000)
            assert page.evaluate("() => window.__updates") <= 2, "the red edge took more than two collections"
            stroke = page.eval_on_selector(edge, "el => getComputedStyle(el).stroke")
            assert stroke == "rgb(198, 40, 40)", stroke
            banner = page.inner_text("#telemetry-live [data-health]")
            assert f"KV transfer from {prefill.name} to {decode.name} failed" in banner
            assert "Failed to transfer KV cache for request cmpl-tandem-probe-" in banner  # the engine's line
            # the links table says where the state comes from and how fresh it is
            link_row = f'#telemetry-live [data-links] tr[data-link-row="{prefill.name}->{decode.name}"]'
            assert page.get_attribute(link_row, "data-state") == "down"
            sources = page.inner_text(f"{link_row} .link-sources")
            assert "engine log" in sources and "probe" in sources, sources
            assert re.search(r"(engine log|probe) · (now|\d+ s ago): ", sources), sources  # freshness
            assert page.locator(f"{link_row} [data-blind]").count() >= 1
            assert page.get_attribute("#telemetry-live [data-health]", "data-state") in ("degraded", "down")
            for pod in (prefill.name, decode.name):
                assert (
                    page.get_attribute(f'#telemetry-live .pd-node[data-pod="{pod}"]', "data-ready") == "true"
                )
            row = page.inner_text(f'#telemetry-live [data-pods] tr[data-pod="{decode.name}"]')
            assert "Ready" in row
            page.screenshot(path=str(SHOTS / "telemetry-topology-link-down.png"), full_page=True)
            # On a phone, with the live graph, the links table and the events filled, the page is the
            # screen's width (the links table scrolls inside its card).
            page.set_viewport_size({"width": 390, "height": 844})
            page.wait_for_timeout(300)
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.locator("#telemetry-live [data-links]").scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "telemetry-topology-live-390.png"))
            page.set_viewport_size({"width": 1440, "height": 1000})

            page.goto(f"{base}/")
            page.wait_for_selector(f'#overview-table tr[data-topology-id="{topology.pk}"]')
            page.wait_for_function(
                "(id) => ['degraded', 'down'].includes("
                'document.querySelector(`#overview-table tr[data-topology-id="${id}"]`).dataset.health)',
                arg=topology.pk,
            )
            reason = page.locator(
                f'#overview-table tr[data-topology-id="{topology.pk}"] [data-cell="reason"]'
            )
            assert "KV" in reason.inner_text()
            assert f"from {prefill.name} to {decode.name} failed" in (reason.get_attribute("title") or "")
            page.screenshot(path=str(SHOTS / "telemetry-overview.png"), full_page=True)

            # Data stops: the panel turns grey and says for how long nothing arrived.
            page.goto(f"{base}/topologies/{topology.pk}/")
            page.wait_for_selector(f'#telemetry-live .pd-node[data-pod="{decode.name}"]')
            collector.stop()
            page.wait_for_function(
                "() => document.getElementById('telemetry-live').dataset.liveState === 'stale'",
                timeout=30_000,
            )
            assert "no data for" in page.inner_text("#telemetry-live [data-live-text]")
            page.screenshot(path=str(SHOTS / "telemetry-topology-stale.png"), full_page=True)
        finally:
            collector.stop()
            requests.delete(f"{pod_url(decode)}/sandbox/faults", timeout=5)
    assert not collector.errors, collector.errors
    assert not load_errors, load_errors
