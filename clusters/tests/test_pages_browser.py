"""The clusters pages in a real Chromium: screenshots of each, and the register form's method switch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.utils import timezone

from clusters.models import AuthMethod, Cluster, ClusterHealthCheck

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _seed() -> Cluster:
    now = timezone.now()
    healthy = Cluster.objects.create(
        name="ascend-lab",
        description="4 × Atlas 800T A2, DeepSeek P/D",
        auth_method=AuthMethod.KUBECONFIG,
        server="https://10.20.0.5:6443",
        context_name="ascend-lab-admin",
        health_state="healthy",
        version="v1.31.2",
        kthena_installed=True,
        last_checked=now,
        last_latency_ms=12.5,
        installed_crds=[
            "modelservings.workload.serving.volcano.sh",
            "modelservers.networking.serving.volcano.sh",
            "modelroutes.networking.serving.volcano.sh",
        ],
        permissions=[
            {
                "verb": "create",
                "group": "workload.serving.volcano.sh",
                "resource": "modelservings",
                "label": "create modelservings",
                "why": "deploy P/D workloads with Kthena",
                "allowed": True,
            },
            {
                "verb": "delete",
                "group": "",
                "resource": "services",
                "label": "delete services",
                "why": "give each role a stable address",
                "allowed": False,
            },
        ],
    )
    for i, used in enumerate((8, 6, 2, 0), start=1):
        healthy.nodes.create(
            name=f"atlas-{i}",
            ready=i != 4,
            accelerator_resource="huawei.com/ascend-1980",
            capacity=8,
            allocatable=8,
            in_use=used,
            seen=now,
            accelerators={"huawei.com/ascend-1980": {"capacity": 8, "allocatable": 8, "in_use": used}},
        )
    for minutes, state in ((30, "healthy"), (20, "degraded"), (10, "unreachable"), (1, "healthy")):
        ClusterHealthCheck.objects.create(
            cluster=healthy,
            checked_at=now - timezone.timedelta(minutes=minutes),
            state=state,
            latency_ms=11.0,
            message="v1.31.2; check took 240 ms",
        )
    from topologies.models import Topology

    Topology.objects.create(
        name="deepseek-pd",
        cluster=healthy,
        namespace="llm",
        model_name="deepseek-r1",
        engine="vllm-ascend",
        image="vllm-ascend:v0.9",
        backend="kthena",
        kv_connector="mooncake",
        spec={},
        slo_ttft_ms=800,
        slo_tbt_ms=60,
    )
    Cluster.objects.create(
        name="gpu-east",
        auth_method=AuthMethod.TOKEN,
        server="https://10.30.0.9:6443",
        health_state="unreachable",
        last_checked=now,
        last_error="cannot reach https://10.30.0.9:6443: connection refused",
    )
    return healthy


def _login(page, live_server, user):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", "correct-horse-battery")
    page.click("button[type=submit]")


def test_clusters_pages_screenshots(page, live_server, admin_user):
    cluster = _seed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 900})
    _login(page, live_server, admin_user)

    page.goto(f"{live_server.url}/clusters/")
    assert page.locator(".state-unreachable").first.is_visible()
    page.screenshot(path=str(SHOTS / "clusters-list.png"), full_page=True)

    page.goto(f"{live_server.url}/clusters/{cluster.pk}/")
    assert page.locator("progress.bar").first.is_visible()
    page.screenshot(path=str(SHOTS / "clusters-detail.png"), full_page=True)

    page.goto(f"{live_server.url}/clusters/register/")
    assert page.locator("#id_kubeconfig").is_visible()
    assert not page.locator("#id_server").is_visible()
    page.check("input[name=method][value=token]")
    assert page.locator("#id_server").is_visible()
    assert not page.locator("#id_kubeconfig").is_visible()
    page.click(".register-form button[type=submit]")
    assert page.locator(".field-error").first.is_visible()
    page.screenshot(path=str(SHOTS / "clusters-register-errors.png"), full_page=True)

    page.goto(f"{live_server.url}/clusters/register/")
    page.screenshot(path=str(SHOTS / "clusters-register.png"), full_page=True)

    page.goto(f"{live_server.url}/clusters/{cluster.pk}/remove/")
    assert "deepseek-pd" in page.content()
    page.screenshot(path=str(SHOTS / "clusters-remove.png"), full_page=True)


def test_register_the_sandbox_through_the_form(page, live_server, admin_user, sandbox_cluster):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 900})
    _login(page, live_server, admin_user)
    page.goto(f"{live_server.url}/clusters/register/")
    page.fill("#id_name", "sandbox")
    page.fill("#id_description", "Emulated cluster: 4 nodes × 8 huawei.com/ascend-1980")
    page.fill("#id_kubeconfig", sandbox_cluster.kubeconfig_path.read_text())
    page.click(".register-form button[type=submit]")
    page.wait_for_url("**/clusters/*/")
    assert "Registered sandbox" in page.content()
    page.click("text=Check now")
    page.wait_for_selector(".nodes-table")
    assert page.locator(".nodes-table tbody tr").count() == 4
    assert page.locator("h1 .state-healthy").is_visible()
    page.screenshot(path=str(SHOTS / "clusters-detail-sandbox.png"), full_page=True)


def test_register_a_cluster_with_prometheus_metrics_through_the_form(
    page, live_server, admin_user, sandbox_cluster_isolated, prometheus_isolated
):
    """The isolated sandbox (pod IPs unreachable) with its Prometheus: the page keeps the choice and
    shows what the probe found for each source."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1366, "height": 900})
    _login(page, live_server, admin_user)
    page.goto(f"{live_server.url}/clusters/register/")
    page.fill("#id_name", "remote-lab")
    page.check("input[name=method][value=token]")
    page.fill("#id_server", sandbox_cluster_isolated.server)
    page.fill("#id_token", sandbox_cluster_isolated.token)
    page.check("input[name=metrics_source][value=prometheus]")
    page.fill("#id_prometheus_url", prometheus_isolated.url)
    page.click(".register-form button[type=submit]")
    page.wait_for_url("**/clusters/*/")
    panel = page.locator("#metrics-source")
    assert panel.get_attribute("data-metrics-source") == "prometheus"
    assert "answers" in panel.locator("tr[data-source=prometheus]").inner_text()
    assert prometheus_isolated.url in panel.inner_text()
    panel.screenshot(path=str(SHOTS / "clusters-metrics-source.png"))
