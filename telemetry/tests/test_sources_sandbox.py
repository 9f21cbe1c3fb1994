"""Deploy and collect end to end through each metrics source: direct on the flat pod network, the
API-server proxy and a real Prometheus on the isolated one; a failing source is a named problem."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

import kube
from clusters.selectors import cluster_connection
from clusters.services import cluster_register, cluster_set_metrics_source
from kube.labels import TOPOLOGY
from telemetry import services
from telemetry.models import Point, Series

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deploy(operator):
    """Deploy the Mooncake preset through ``source``; its namespace is removed afterwards (the
    sandboxes are shared by the session and their accelerators are few)."""
    made: list[tuple[object, str]] = []

    def run(sandbox, *, source: str, prometheus_url: str = ""):
        cluster, topology = _deploy(sandbox, operator, source=source, prometheus_url=prometheus_url)
        made.append((sandbox, topology.namespace))
        return cluster, topology

    yield run
    for sandbox, namespace in made:
        sandbox.kubectl("delete", "namespace", namespace, "--wait=false")  # type: ignore[attr-defined]


def _deploy(sandbox, operator, *, source: str, prometheus_url: str = ""):
    from deployments.tests.sandbox_helpers import deploy_now
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = cluster_register(
        name=f"sbx-{uuid.uuid4().hex[:6]}",
        server=sandbox.server,
        token=sandbox.token,
        metrics_source=source,
        prometheus_url=prometheus_url,
    )
    namespace = f"src{uuid.uuid4().hex[:8]}"
    topology = topology_create(
        cluster=cluster, spec=preset_spec("deepseek-ascend-mooncake", namespace=namespace), actor=operator
    )
    deployment = deploy_now(topology, operator)
    assert deployment.state == "succeeded", deployment.__dict__
    return cluster, topology


def _router_url(cluster, topology) -> str:
    conn = cluster_connection(cluster)
    routes = kube.list_objects(
        conn, "networking.serving.volcano.sh/v1alpha1", "ModelRoute", topology.namespace
    )
    return routes[0]["metadata"]["annotations"]["sandbox.tandem.io/router-url"]


def _send_traffic(url: str, model: str, count: int = 3) -> None:
    for _ in range(count):
        answer = requests.post(
            f"{url}/v1/completions",
            json={"model": model, "prompt": "hello " * 40, "max_tokens": 4},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text


def _collect_until(topology, predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    snapshot = None
    while time.monotonic() < deadline:
        snapshot = services.telemetry_collect(topology_id=topology.pk)
        if snapshot is not None and predicate(snapshot):
            return snapshot
        time.sleep(0.5)
    pytest.fail(
        f"collection never satisfied the condition; last snapshot health: {snapshot and snapshot['health']}"
    )


def _metrics_flow(snapshot) -> bool:
    serving = [p for p in snapshot["pods"] if p["role"] in ("prefill", "decode")]
    return bool(serving) and all(p["error"] is None and p["engine"] == "vllm" for p in serving)


def _assert_stored_and_served(client, user, topology) -> None:
    assert Series.objects.filter(topology=topology).exists()
    assert Point.objects.filter(series__topology=topology).exists()
    client.force_login(user)
    latest = client.get(f"/api/v1/topologies/{topology.pk}/metrics/latest/")
    assert latest.status_code == 200, latest.content
    body = latest.json()
    pods = body.get("pods") or body.get("snapshot", {}).get("pods")
    assert pods and all(p["error"] is None for p in pods if p["role"] in ("prefill", "decode")), body


def test_direct_source_on_the_flat_pod_network(sandbox_cluster, deploy, operator, client):
    cluster, topology = deploy(sandbox_cluster, source="direct")
    _send_traffic(_router_url(cluster, topology), topology.model_name)
    snapshot = _collect_until(topology, lambda s: _metrics_flow(s) and (s["totals"]["prompt_tps"] or 0) >= 0)
    assert snapshot["health"]["state"] != "stale"
    _assert_stored_and_served(client, operator, topology)


def test_registration_on_the_isolated_network_finds_pods_unreachable_and_recommends_the_proxy(
    sandbox_cluster_isolated, deploy
):
    cluster, _ = deploy(sandbox_cluster_isolated, source="auto")
    probed = cluster_set_metrics_source(cluster=cluster, metrics_source="auto")
    results = probed.metrics_probe["results"]
    assert results["direct"]["ok"] is False and "unreachable" in results["direct"]["message"]
    assert results["proxy"]["ok"] is True
    assert probed.metrics_probe["recommended"] == "proxy"
    assert probed.metrics_source == "proxy"


def test_proxy_source_on_the_isolated_pod_network(sandbox_cluster_isolated, deploy, operator, client):
    cluster, topology = deploy(sandbox_cluster_isolated, source="proxy")
    router = _router_url(cluster, topology)
    pods = kube.list_pods(cluster_connection(cluster), topology.namespace, f"{TOPOLOGY}={topology.pk}")
    assert not any(router.startswith(f"http://{p.ip}:") for p in pods)  # the external address
    _send_traffic(router, topology.model_name)
    _collect_until(topology, _metrics_flow)
    _send_traffic(router, topology.model_name)
    snapshot = _collect_until(topology, lambda s: _metrics_flow(s) and (s["totals"]["requests_ps"] or 0) > 0)
    assert snapshot["health"]["state"] != "stale"
    _assert_stored_and_served(client, operator, topology)


def test_direct_source_on_the_isolated_network_is_a_named_problem(sandbox_cluster_isolated, deploy):
    _, topology = deploy(sandbox_cluster_isolated, source="direct")
    snapshot = services.telemetry_collect(topology_id=topology.pk)
    assert snapshot is not None
    assert snapshot["health"]["state"] == "stale"
    assert snapshot["health"]["reasons"][0].startswith("metrics source direct: cannot connect to http://")


def test_prometheus_source_on_the_isolated_pod_network(
    sandbox_cluster_isolated, prometheus_isolated, deploy, operator, client
):
    cluster, topology = deploy(
        sandbox_cluster_isolated, source="prometheus", prometheus_url=prometheus_isolated.url
    )
    assert cluster.metrics_probe["results"]["prometheus"]["ok"] is True
    router = _router_url(cluster, topology)
    _send_traffic(router, topology.model_name)
    _collect_until(topology, _metrics_flow, timeout=30)
    _send_traffic(router, topology.model_name)
    snapshot = _collect_until(topology, lambda s: _metrics_flow(s) and (s["totals"]["requests_ps"] or 0) > 0)
    assert snapshot["health"]["state"] != "stale"
    _assert_stored_and_served(client, operator, topology)


def test_prometheus_that_stops_answering_is_a_named_problem(sandbox_cluster_isolated, deploy):
    with socket_closed_port() as port:
        url = f"http://127.0.0.1:{port}"
        _, topology = deploy(sandbox_cluster_isolated, source="prometheus", prometheus_url=url)
        snapshot = services.telemetry_collect(topology_id=topology.pk)
    assert snapshot is not None
    assert snapshot["health"]["state"] == "stale"
    assert snapshot["health"]["reasons"][0].startswith(f"Prometheus at {url} unreachable")
    again = services.telemetry_collect(topology_id=topology.pk)  # pods now in back-off: still named
    assert again is not None and again["health"]["reasons"][0].startswith(f"Prometheus at {url}")


class socket_closed_port:
    """A loopback port nothing listens on (bound then released)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None
