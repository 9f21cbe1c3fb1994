"""Click Verify on a topology page and read the result, with a real worker running the probes."""

from __future__ import annotations

import os

import pytest

from gateway.services import route_update
from gateway.tests.conftest import FALLBACK_MODEL
from telemetry.tests.test_browser_live import browser_type_launch_args, login
from tests.support import celery_worker, subprocess_env, uvicorn_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
__all__ = ["browser_type_launch_args"]


def test_verify_button_runs_the_probes_and_shows_what_they_found(
    page, operator, make_topology, cluster_stack, fallback_stack
):
    topology = make_topology()
    route_update(
        topology=topology,
        changes={
            "endpoint_url": cluster_stack.url,
            "fallback_base_url": f"{fallback_stack.url}/v1",
            "fallback_model": FALLBACK_MODEL,
        },
        actor=operator,
    )
    env = subprocess_env()
    with uvicorn_server(env) as base, celery_worker(env, queues="default"):
        login(page, base, operator)
        page.goto(f"{base}/topologies/{topology.pk}/#gateway")
        panel = page.locator("#gateway")
        panel.locator("input[value=concurrency]").uncheck()
        panel.locator("input[value=links]").uncheck()
        panel.locator("input[value=pd]").uncheck()  # it waits for a telemetry collection: none runs here
        panel.locator("[data-role=verify]").click()
        page.wait_for_url(f"{base}/topologies/{topology.pk}/#gateway-verify")
        page.locator("#gateway .probe-run[data-state=passed]").wait_for(timeout=60_000)
        rows = page.locator("#gateway .probe-table tbody tr")
        assert rows.count() == 3
        assert "passed" in page.locator("#gateway .probe-smoke").inner_text()
        assert (
            "TTFT per request with the shared prefix" in page.locator("#gateway .probe-prefix").inner_text()
        )
        assert "fallback" in page.locator("#gateway .probe-fallback").inner_text()
        page.locator("#gateway").screenshot(path="var/screenshots/gateway-verify.png")
        page.screenshot(path="var/screenshots/topology-gateway-page.png", full_page=True)
