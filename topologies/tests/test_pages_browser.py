"""Topology pages in a real Chromium against the sandbox: screenshots, live preflight as one types."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from topologies.presets import preset_spec
from topologies.services import topology_create, topology_update

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _login(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")


def test_topology_pages_and_live_preflight(page, live_server, operator, sandbox_cluster):
    from clusters.services import cluster_register

    cluster = cluster_register(name="sandbox", server=sandbox_cluster.server, token=sandbox_cluster.token)
    topology = topology_create(cluster=cluster, spec=preset_spec("deepseek-ascend-mooncake"), actor=operator)
    spec = preset_spec("deepseek-ascend-mooncake")
    spec["roles"]["decode"]["replicas"] = 2
    topology_update(topology=topology, spec=spec, actor=operator, message="second decode instance")
    gpu = preset_spec("qwen-gpu-nixl", backend="deployments")
    topology_create(cluster=cluster, spec=gpu, actor=operator)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 900})
    _login(page, live_server, operator)

    page.goto(f"{live_server.url}/topologies/")
    assert page.locator("a.topo-name").count() == 2
    page.screenshot(path=str(SHOTS / "topologies-list.png"), full_page=True)

    page.goto(f"{live_server.url}/topologies/{topology.pk}/")
    assert page.locator("pre.diff .diff-add").first.is_visible()
    page.click("text=Run preflight")
    page.wait_for_selector("#detail-preflight .preflight-head")
    assert "namespace dev does not exist; the deploy will create it" in page.inner_text("#detail-preflight")
    page.screenshot(path=str(SHOTS / "topologies-detail.png"), full_page=True)

    page.goto(f"{live_server.url}/topologies/new/?preset=deepseek-ascend-mooncake")
    page.wait_for_selector('#preflight-results [data-code="namespace_created"]')
    assert "error" not in page.inner_text("#preflight-results")
    assert not page.locator('[data-show-for="mooncake-store"]').first.is_visible()
    page.fill('[name="roles.prefill.accelerator_resource"]', "huawei.com/Ascend910")
    page.wait_for_selector('#preflight-results [data-code="accelerator_resource_unknown"]')
    assert "nodes offer huawei.com/ascend-1980" in page.inner_text("#preflight-results")
    page.select_option('[name="connector.type"]', "mooncake-store")
    assert page.locator('[name="connector.master_address"]').is_visible()
    page.fill('[name="connector.master_address"]', "mooncake-master.dev.svc:50051")
    page.wait_for_selector('#preflight-results [data-code="connector_backend_missing"]')
    page.screenshot(path=str(SHOTS / "topologies-editor-preflight.png"), full_page=True)

    page.fill('[name="roles.prefill.tensor_parallel_size"]', "8")
    page.click("#topology-form button[type=submit]")
    assert page.locator('.field-error[data-field="roles.prefill.accelerator_count"]').is_visible()
    page.screenshot(path=str(SHOTS / "topologies-editor-errors.png"), full_page=True)

    page.goto(f"{live_server.url}/topologies/{topology.pk}/edit/")
    page.fill('[name="roles.prefill.replicas"]', "2")
    page.fill('[name="message"]', "second prefill instance")
    page.click("#topology-form button[type=submit]")
    page.wait_for_url(f"**/topologies/{topology.pk}/")
    assert "Saved revision 3" in page.content()
    page.screenshot(path=str(SHOTS / "topologies-detail-r3.png"), full_page=True)
