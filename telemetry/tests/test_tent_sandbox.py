"""End to end against the sandbox: a Mooncake topology whose spec turns on the transfer engine's metrics
(connector.transfer_metrics) declares TENT's port, telemetry reads it as part of each pod, and transfers
falling back from RDMA to TCP (the `kv_transport_fallback` fault) are named on the topology."""

from __future__ import annotations

import pytest
import requests

from telemetry.testing import collect_intervals, deploy_ready, undeploy
from telemetry.tests.test_collect_sandbox import base_url, collect_until, pods_by_role, router_url, send_long
from topologies.presets import preset_spec


@pytest.fixture
def mooncake_with_tent(sandbox_cluster, db, operator):
    spec = preset_spec("deepseek-ascend-mooncake")
    spec = {**spec, "connector": {**spec["connector"], "transfer_metrics": True}}
    ready = deploy_ready(sandbox_cluster, operator, prefix="tent", spec=spec)
    yield ready.topology, ready.conn, ready.namespace
    undeploy(sandbox_cluster, ready.namespace)


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
