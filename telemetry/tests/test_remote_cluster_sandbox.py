"""As an operator with a remote cluster sees it: a least-privilege token (exactly docker/k8s/rbac.yaml,
RBAC enforced), pod IPs Tandem cannot reach, metrics through the API server's proxy; a KV-link fault
still turns that link red and is explained within two intervals, and the gateway's links probe fails."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import requests
import yaml

import kube
from clusters.selectors import cluster_connection
from clusters.services import cluster_register
from deployments.tests.sandbox_helpers import deploy_now
from kube.labels import KTHENA_ROLE, ROLE, TOPOLOGY
from telemetry.testing import collect_intervals

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_deploys")]


@pytest.fixture
def fast_deploys(settings):
    settings.DEPLOY_POLL_SECONDS = 0.2
    settings.DEPLOY_FAIL_FAST_SECONDS = 2
    settings.DEPLOY_READY_TIMEOUT_SECONDS = 60


def _least_privilege_token(sandbox) -> str:
    from deployments.tests.test_least_privilege_sandbox import service_account_with, shipped_rbac

    role, _ = shipped_rbac()
    return service_account_with(sandbox, role["rules"])


def _pod_fault(sandbox, pod, body: dict | None, *, method: str = "POST") -> None:
    """The engine's fault switch through the API server's pods proxy: its IP is not reachable here."""
    url = f"{sandbox.server}/api/v1/namespaces/{pod.namespace}/pods/{pod.name}:8000/proxy/sandbox/faults"
    answer = requests.request(
        method, url, json=body, headers={"Authorization": f"Bearer {sandbox.token}"}, timeout=10
    )
    assert answer.status_code in (200, 201, 204), answer.text


def _link(snapshot, prefill: str, decode: str):
    return next(x for x in snapshot["links"] if x["prefill"] == prefill and x["decode"] == decode)


def test_link_fault_is_red_and_explained_through_the_proxy_with_the_shipped_rbac(
    sandbox_cluster_isolated, operator
):
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    sandbox = sandbox_cluster_isolated
    cluster = cluster_register(
        name=f"remote-{uuid.uuid4().hex[:6]}",
        server=sandbox.server,
        token=_least_privilege_token(sandbox),
        metrics_source="proxy",
    )
    assert cluster.health_state in ("healthy", "unknown"), cluster.last_error
    namespace = f"rc{uuid.uuid4().hex[:8]}"
    topology = topology_create(
        cluster=cluster, spec=preset_spec("deepseek-ascend-mooncake", namespace=namespace), actor=operator
    )
    try:
        deployment = deploy_now(topology, operator)
        assert deployment.state == "succeeded", (deployment.error, deployment.diagnosis)
        conn = cluster_connection(cluster)
        pods = kube.list_pods(conn, namespace, f"{TOPOLOGY}={topology.pk}")
        role = {p.name: p.labels.get(KTHENA_ROLE) or p.labels.get(ROLE) for p in pods}
        prefill = next(p for p in pods if role[p.name] == "prefill")
        decode = next(p for p in pods if role[p.name] == "decode")
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://{decode.ip}:8000/metrics", timeout=2)  # not from here

        _, second = collect_intervals(topology.pk, 2)
        link = _link(second, prefill.name, decode.name)
        assert link["state"] == "up", link
        assert "probe" in {s["kind"] for s in link["sources"]}, link["sources"]  # probed through the proxy

        _pod_fault(sandbox, decode, {"kind": "link_down", "peer": prefill.name})
        try:
            snapshots = collect_intervals(topology.pk, 2)
            red = _link(snapshots[-1], prefill.name, decode.name)
            assert red["state"] == "down", [_link(s, prefill.name, decode.name) for s in snapshots]
            assert red["reason"] and decode.name in red["reason"], red

            from gateway import probes
            from gateway.routes import RouteEntry

            entry = RouteEntry(
                topology.pk,
                topology.name,
                topology.model_name,
                (topology.model_name,),
                "",
                None,
                5.0,
                3,
                15.0,
            )
            result = asyncio.run(probes.links(entry))
            assert not result.passed
            assert any(
                prefill.name in line and decode.name in line and "down" in line for line in result.diagnosis
            )
        finally:
            _pod_fault(sandbox, decode, None, method="DELETE")
    finally:
        sandbox.kubectl("delete", "namespace", namespace, "--wait=false")


def test_the_shipped_rbac_grants_what_the_proxy_source_needs(sandbox_cluster_isolated):
    """`get` and `create` on pods/proxy: metrics are GETs, the KV-link probes POSTs."""
    from pathlib import Path

    rules = yaml.safe_load_all(
        (Path(__file__).resolve().parents[2] / "docker" / "k8s" / "rbac.yaml").read_text()
    )
    role = next(d for d in rules if d and d["kind"] == "ClusterRole")
    proxy = [r for r in role["rules"] if "pods/proxy" in r.get("resources", [])]
    assert proxy and {"get", "create"} <= set(proxy[0]["verbs"])
