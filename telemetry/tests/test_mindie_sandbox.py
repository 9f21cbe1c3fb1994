"""Against the sandbox: a MindIE topology as Tandem renders it serves /metrics on its own metrics plane
(``metricsPort``, as MindIE does), and telemetry scrapes every pod there (docs/ascend.md)."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

import kube
from kube.labels import TOPOLOGY
from telemetry import services


def test_mindie_pods_are_scraped_on_their_metrics_port(sandbox_cluster, db, operator):
    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register
    from topologies.services import topology_create
    from topologies.tests.combinations import combination

    cluster = cluster_register(
        name=f"sbx-{uuid.uuid4().hex[:6]}", server=sandbox_cluster.server, token=sandbox_cluster.token
    )
    namespace = f"mie{uuid.uuid4().hex[:8]}"
    base = combination("mindie", "llm-datadist", "kthena")
    role = {
        "replicas": 1,
        "accelerator_resource": "huawei.com/ascend-1980",
        "accelerator_count": 1,
        "env": {"MINDIE_MODEL_NAME": base["model_name"]},
    }
    spec = combination(
        "mindie", "llm-datadist", "kthena", namespace=namespace, roles={"prefill": role, "decode": role}
    )
    topology = topology_create(cluster=cluster, spec=spec, actor=operator)
    conn = cluster_connection(cluster)
    kube.apply_objects(conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    revision = topology.current_revision
    assert revision is not None
    kube.apply_objects(conn, revision.manifests)
    topology.deployed_revision = revision
    topology.save(update_fields=["deployed_revision"])
    try:
        deadline = time.monotonic() + 60
        pods: list[kube.PodInfo] = []
        while time.monotonic() < deadline:
            pods = [p for p in kube.list_pods(conn, namespace, f"{TOPOLOGY}={topology.pk}") if p.ready]
            if len(pods) >= 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the MindIE pods are not Ready in 60 s: {pods}")
        port = int(spec["port"])
        pod = pods[0]
        assert port + 2 in pod.container_ports
        # MindIE's planes: /metrics only on metricsPort, the management API on the service port
        assert requests.get(f"http://{pod.ip}:{port}/metrics", timeout=5).status_code == 404
        assert requests.get(f"http://{pod.ip}:{port}/v1/status", timeout=5).status_code == 200
        snapshot = services.telemetry_collect(topology_id=topology.pk)
        assert snapshot is not None
        scraped = [(p["name"], p["error"], p["stale"], p["engine"]) for p in snapshot["pods"]]
        assert len(scraped) >= 2 and all(e is None and not s for _, e, s, _ in scraped), scraped
    finally:
        sandbox_cluster.kubectl(
            "delete",
            "modelroutes,modelservers,modelservings,services",
            "--all",
            "-n",
            namespace,
            "--wait=false",
        )
