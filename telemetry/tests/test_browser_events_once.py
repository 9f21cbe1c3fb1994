"""An SLO alert reaches the topology page three ways (snapshot, history, live message) and is listed
once in Events; distinct alerts stay distinct. Runs the page's own chart store in Chromium."""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_one_alert_is_one_event(page, live_server, viewer, operator):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="https://127.0.0.1:1")
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=operator)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", viewer.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/topologies/{topology.pk}/")
    kinds = page.evaluate(
        """() => {
          const s = new window.Tandem.telemetryCharts.Store();
          const text = "TTFT p95 1450 ms over the 1000 ms SLO";
          s.addMarker(1000.0, "alert_raised", text);          // in the snapshot
          s.addMarker(1000.4, "alert_raised", text);          // in the history (recorded a moment later)
          s.addMarker(999.8, "alert_raised", text);           // the live message
          s.addMarker(1000.2, "alert_raised", "TBT p95 90 ms over the 50 ms SLO");
          s.addMarker(1500.0, "alert_raised", text);          // raised again later: a new event
          return s.markerList().map(m => [m.ts, m.text.slice(0, 3)]);
        }"""
    )
    assert kinds == [[999.8, "TTF"], [1000.2, "TBT"], [1500.0, "TTF"]]
