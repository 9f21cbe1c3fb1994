"""The dashboard's own behaviour in Chromium, fed with snapshots built in the test: the overview's
empty state and problems-first order (also after live updates), the pod table's sorting, link and pod
colours, deployment markers and the history fetched for the window picker."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from controlplane.broadcast import overview_group, send_now, topology_group
from telemetry import cache
from telemetry.snapshot import LinkSample, PodSample, TopologySnapshot, empty_metrics, empty_snapshot
from telemetry.tests.test_browser_live import browser_type_launch_args, login
from tests.support import (
    ROOT,
    VENV_BIN,
    free_port,
    http_get,
    stop,
    subprocess_env,
    uvicorn_server,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
__all__ = ["browser_type_launch_args"]


def push(group: str, message: dict[str, Any]) -> None:
    """Send from a thread of its own: Playwright keeps an event loop running in the test's thread."""
    sender = threading.Thread(target=send_now, args=(group, message))
    sender.start()
    sender.join(10)


def store(topology: Any, snapshot: TopologySnapshot) -> None:
    """Store a snapshot as a collection does (it pushes after commit), from a thread of its own."""
    from django.db import connection

    from telemetry.services import telemetry_store

    def run() -> None:
        try:
            telemetry_store(topology=topology, snapshot=snapshot, actions={})
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(20)


def pod(
    name: str, role: str, *, ready: bool = True, waiting: float = 0, hit_rate: float | None = 0.5
) -> PodSample:
    return PodSample(
        **{**empty_metrics(), "hit_rate": hit_rate, "waiting": waiting, "running": 1, "ttft_p95": 0.05},
        name=name,
        role=role,
        ip="127.0.0.1",
        ready=ready,
        phase="Running" if ready else "Pending",
        engine="vllm",
        stale=False,
        error=None,
        restarted=False,
    )


def link(
    prefill: str, decode: str, state: str, p95: float | None = 12.0, mean: float | None = 6.0
) -> LinkSample:
    return LinkSample(
        prefill=prefill,
        decode=decode,
        state=state,
        status_code=None,
        xfer_p50_ms=5.0,
        xfer_p95_ms=p95,
        xfer_mean_ms=mean,
        bytes_per_s=1e6,
        transfers=4,
        failed=0,
        reason=None,
        probe_ms=20.0,
        shared=True,
        sources=[
            {"kind": "probe", "detail": "probe through the pair answered in 20 ms", "ts": time.time() - 3},
            {
                "kind": "metrics",
                "detail": f"vllm:nixl_* on {decode}: 4 transfers, 0 failed",
                "ts": time.time(),
            },
        ],
        observed_at=time.time(),
        blind=["connector metrics carry no peer label: transfer figures are the decode pod's"],
    )


def snapshot_of(
    topology_id: int, *, state: str = "healthy", reasons: tuple[str, ...] = ()
) -> TopologySnapshot:
    snap = empty_snapshot(topology_id, time.time(), 2.0, "")
    snap["health"] = {"state": state, "reasons": list(reasons)}
    snap["totals"].update(pods=3, ready=2, hit_rate=0.42, ttft_p95=0.08, links_up=1, links_degraded=1)
    snap["pods"] = [
        pod("prefill-0", "prefill", waiting=3),
        pod("decode-0", "decode", waiting=7, hit_rate=None),
        pod("decode-1", "decode", ready=False, waiting=1),
    ]
    snap["links"] = [
        link("prefill-0", "decode-0", "up"),
        link("prefill-0", "decode-1", "degraded", 480.0, 300.0),
    ]
    return snap


@pytest.fixture
def deployed_topologies(admin_user: Any) -> list[Any]:
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    out = []
    for name in ("alpha", "beta"):
        topology = topology_create(
            cluster=cluster, spec=preset_spec("qwen-gpu-nixl", name=name), actor=admin_user
        )
        topology.deployed_revision = topology.current_revision
        topology.save(update_fields=["deployed_revision"])
        out.append(topology)
    return out


def rows(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        "#overview-table tbody tr", "trs => trs.map(tr => tr.dataset.topologyId)"
    )


def test_overview_without_clusters_says_what_to_do_next(page: Any, viewer: Any) -> None:
    with uvicorn_server(subprocess_env()) as base:
        login(page, base, viewer)
        text = page.inner_text("main")
    assert "No clusters yet" in text
    assert "Ask an admin to register a cluster." in text


def test_overview_puts_problems_first_and_resorts_on_live_updates(
    page: Any, viewer: Any, deployed_topologies: list[Any]
) -> None:
    alpha, beta = deployed_topologies
    with uvicorn_server(subprocess_env()) as base:
        login(page, base, viewer)
        # Fresh snapshots (older than three intervals would read as stale), then the page.
        cache.set_snapshot(snapshot_of(alpha.pk))
        cache.set_snapshot(snapshot_of(beta.pk, state="down", reasons=("every KV link is down",)))
        page.goto(f"{base}/")
        page.wait_for_selector("#overview-table")
        assert rows(page) == [str(beta.pk), str(alpha.pk)]
        assert page.inner_text("[data-problem-count]") == "1"
        page.wait_for_function("() => document.querySelector('[data-live-text]').textContent === 'Live'")
        summary = {
            "kind": "overview",
            "slo": {"state": "violated"},
            "hit_rate": 0.9,
            "ttft_p95": 1.5,
            "tbt_p95": 0.0312,
            "gen_tps": 1234.4,
        }
        push(
            overview_group(),
            {**summary, "topology_id": beta.pk, "health": {"state": "healthy", "reasons": []}},
        )
        push(
            overview_group(),
            {
                **summary,
                "topology_id": alpha.pk,
                "health": {"state": "down", "reasons": ["decode-0 is not Ready"]},
                "pods": 4,
                "ready": 3,
                "links_down": 2,
            },
        )
        page.wait_for_function(
            "(id) => document.querySelector('#overview-table tbody tr').dataset.topologyId === String(id)",
            arg=alpha.pk,
        )
        first = page.inner_text(f'#overview-table tr[data-topology-id="{alpha.pk}"]')
        assert "decode-0 is not Ready" in first and "violated" in first
        page.wait_for_function(
            '(id) => document.querySelector(`tr[data-topology-id="${id}"] [data-cell=hit_rate]`)'
            ".textContent === '90.0 %'",
            arg=alpha.pk,
        )
        assert page.get_attribute(f'tr[data-topology-id="{alpha.pk}"]', "class") == "problem"
        # The live summary carries the counts, so they move without a reload.
        assert page.inner_text(f'tr[data-topology-id="{alpha.pk}"] [data-cell=pods]') == "3 / 4"
        assert page.inner_text(f'tr[data-topology-id="{alpha.pk}"] [data-cell=links_down]') == "2"
        # TBT p95 and output tokens/s sit beside TTFT and move live too.
        page.wait_for_function(
            '(id) => document.querySelector(`tr[data-topology-id="${id}"] [data-cell=gen_tps]`)'
            ".textContent === '1,234 tok/s'",
            arg=alpha.pk,
        )
        assert page.inner_text(f'tr[data-topology-id="{alpha.pk}"] [data-cell=tbt_p95]') == "31.2 ms"
        headers = page.inner_text("#overview-table thead")
        assert "Hit rate (30 s)" in headers and "TBT p95" in headers and "Output tok/s" in headers


def test_topology_panel_sorts_pods_colours_links_and_marks_deployments(
    page: Any, viewer: Any, deployed_topologies: list[Any]
) -> None:
    topology = deployed_topologies[0]
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url) if "/metrics/" in r.url else None)
    with uvicorn_server(subprocess_env()) as base:
        login(page, base, viewer)
        cache.set_snapshot(
            snapshot_of(topology.pk, state="degraded", reasons=("prefill-0 → decode-1 is slow",))
        )
        page.goto(f"{base}/topologies/{topology.pk}/")
        page.wait_for_selector('#telemetry-live tr[data-pod="decode-1"]')
        assert page.get_attribute("#telemetry-live [data-health]", "data-state") == "degraded"
        assert "prefill-0 → decode-1 is slow" in page.inner_text("#telemetry-live [data-health]")
        degraded = '#telemetry-live line[data-link="prefill-0->decode-1"]'
        assert page.eval_on_selector(degraded, "el => getComputedStyle(el).stroke") == "rgb(178, 106, 0)"
        # the label is the link's own mean transfer time; the links table has p95 and the sources
        assert "degraded · xfer 300 ms (pod)" in page.text_content('[data-link-label="prefill-0->decode-1"]')
        row = '#telemetry-live [data-links] tr[data-link-row="prefill-0->decode-1"]'
        assert "p95 480 ms" in page.inner_text(f"{row} [data-xfer]")
        sources = page.inner_text(f"{row} .link-sources")
        assert "probe · 3 s ago: probe through the pair answered in 20 ms" in sources, sources
        assert "connector metrics · " in sources
        assert "no peer label" in page.inner_text(f"{row} .link-blind")
        assert page.get_attribute('.pd-node[data-pod="decode-1"]', "data-state") == "not-ready"

        order = "() => [...document.querySelectorAll('[data-pods] tbody tr')].map(r => r.dataset.pod)"
        page.click('#telemetry-live th[data-sort="waiting"] button')
        assert page.evaluate(order) == ["decode-0", "prefill-0", "decode-1"]
        assert page.get_attribute('th[data-sort="waiting"]', "aria-sort") == "descending"
        page.click('#telemetry-live th[data-sort="waiting"] button')
        assert page.evaluate(order) == ["decode-1", "prefill-0", "decode-0"]

        # A live snapshot keeps the chosen order; a deployment becomes a marker in the events list.
        page.wait_for_function("() => document.getElementById('telemetry-live').dataset.liveState === 'live'")
        later = copy.deepcopy(snapshot_of(topology.pk))
        later["ts"] = time.time() + 1
        later["pods"][1]["waiting"] = 0
        push(topology_group(topology.pk), {"kind": "telemetry", "snapshot": later})
        page.wait_for_function("() => document.querySelector('[data-health]').dataset.state === 'healthy'")
        assert page.evaluate(order) == ["decode-0", "decode-1", "prefill-0"]
        push(
            topology_group(topology.pk),
            {
                "kind": "deployment",
                "id": 5,
                "deployment_kind": "scale",
                "revision": 2,
                "state": "succeeded",
                "state_label": "Succeeded",
            },
        )
        page.wait_for_selector('#telemetry-live [data-events] li[data-kind="deploy"]')
        assert "scale of revision 2: Succeeded" in page.inner_text("#telemetry-live [data-events]")

        with page.expect_response(lambda r: "/metrics/?" in r.url and "step=" in r.url) as answer:
            page.click('#telemetry-live [data-window="3600"]')
        assert answer.value.status == 200
    history = [url for url in requested if "/metrics/?" in url]
    assert len(history) >= 2, requested
    assert "topology.hit_rate" in history[-1] and "step=" in history[-1]


@contextmanager
def asgi_on(port: int) -> Iterator[str]:
    """uvicorn on a given port, so the browser can reconnect to the same address after a restart."""
    proc = subprocess.Popen(
        [
            str(VENV_BIN / "uvicorn"),
            "controlplane.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--timeout-graceful-shutdown",
            "1",
        ],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_get(base + "/healthz", timeout=1)[0] == 200, 30, "uvicorn", proc)
        yield base
    finally:
        stop(proc)


def test_panel_reconnects_and_backfills_the_gap_from_the_history_api(
    page: Any, viewer: Any, deployed_topologies: list[Any]
) -> None:
    topology = deployed_topologies[0]
    port = free_port()
    with asgi_on(port) as base:
        login(page, base, viewer)
        store(topology, snapshot_of(topology.pk))
        page.goto(f"{base}/topologies/{topology.pk}/")
        page.wait_for_function("() => document.getElementById('telemetry-live').dataset.liveState === 'live'")
    page.wait_for_function("() => document.getElementById('telemetry-live').dataset.liveState === 'offline'")
    assert "reconnecting" in page.inner_text("#telemetry-live [data-live-text]")
    # While the page is cut off, collections go on and are stored.
    missed = time.time()
    for k in range(3):
        snap = snapshot_of(topology.pk)
        snap["ts"] = missed + k
        snap["totals"]["hit_rate"] = 0.77
        store(topology, snap)
    # The page comes back only after the last missed collection, as it would on a real outage.
    time.sleep(max(0.0, missed + 2.2 - time.time()))
    with asgi_on(port):
        page.wait_for_function(
            "() => document.getElementById('telemetry-live').dataset.backfill !== undefined", timeout=30_000
        )
        backfill = json.loads(page.get_attribute("#telemetry-live", "data-backfill") or "{}")
    assert backfill["from"] < missed and backfill["to"] > missed + 2
    assert backfill["points"] >= 3, backfill
