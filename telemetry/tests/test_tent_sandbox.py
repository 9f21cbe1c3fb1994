"""End to end against the sandbox: a Mooncake topology whose spec turns on the transfer engine's metrics
(connector.transfer_metrics) declares TENT's port, telemetry reads it as part of each pod, and transfers
falling back from RDMA to TCP (the `kv_transport_fallback` fault) are named on the topology."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

import kube
from kube.labels import TOPOLOGY
from telemetry.testing import collect_intervals
from telemetry.tests.test_collect_sandbox import base_url, collect_until, pods_by_role, router_url, send_long


@pytest.fixture
def mooncake_with_tent(sandbox_cluster, db, operator):
    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = cluster_register(
        name=f"sbx-{uuid.uuid4().hex[:6]}", server=sandbox_cluster.server, token=sandbox_cluster.token
    )
    namespace = f"tent{uuid.uuid4().hex[:8]}"
    spec = preset_spec("deepseek-ascend-mooncake", namespace=namespace)
    spec = {**spec, "connector": {**spec["connector"], "transfer_metrics": True}}
    topology = topology_create(cluster=cluster, spec=spec, actor=operator)
    conn = cluster_connection(cluster)
    kube.apply_objects(conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    kube.apply_objects(conn, topology.current_revision.manifests)
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready = [p for p in kube.list_pods(conn, namespace, f"{TOPOLOGY}={topology.pk}") if p.ready]
        if {"prefill", "decode"} <= {p.labels.get("tandem.io/role") for p in ready}:
            break
        time.sleep(0.2)
    else:
        pytest.fail("prefill and decode pods not Ready in 60 s")
    yield topology, conn, namespace
    sandbox_cluster.kubectl(
        "delete", "modelroutes,modelservers,modelservings,services", "--all", "-n", namespace, "--wait=false"
    )


def test_a_transport_fallback_is_named_on_the_topology(mooncake_with_tent):
    topology, conn, namespace = mooncake_with_tent
    pods = pods_by_role(conn, topology)
    assert all(9100 in p.container_ports for role in ("prefill", "decode") for p in pods[role])
    url = router_url(conn, namespace)
    collect_intervals(topology.pk, 1)
    assert set(send_long(url, topology.model_name, 2)) == {200}
    clean = collect_intervals(topology.pk, 1)[0]
    assert not clean["health"].get("problems"), clean["health"]
    assert not any("transfer engine metrics" in r for r in clean["health"]["reasons"]), clean["health"]

    for pod in pods["prefill"]:  # the side whose transfer engine writes the KV
        fault = {"kind": "kv_transport_fallback"}
        requests.post(f"{base_url(pod)}/sandbox/faults", json=fault, timeout=5).raise_for_status()
    try:
        assert set(send_long(url, topology.model_name, 3)) == {200}  # they succeed, only slower
        snapshots, named = collect_until(
            topology,
            lambda s: any(p["key"] == "transport_fallback" for p in s["health"].get("problems", [])),
            2,
        )
    finally:
        for pod in pods["prefill"]:
            requests.delete(f"{base_url(pod)}/sandbox/faults", timeout=5)
    assert named, [s["health"] for s in snapshots]
    problem = next(p for p in snapshots[-1]["health"]["problems"] if p["key"] == "transport_fallback")
    assert "rdma → tcp" in problem["detail"] and "of KV bytes over TCP" in problem["detail"], problem
    assert "ibv_devinfo" in problem["check"]
    assert any(r.startswith("KV transport fell back") for r in snapshots[-1]["health"]["reasons"])
