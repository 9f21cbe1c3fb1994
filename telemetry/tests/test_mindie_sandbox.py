"""Against the sandbox: a MindIE topology as Tandem renders it serves /metrics on its own metrics plane
(``metricsPort``, as MindIE does), and telemetry scrapes every pod there (docs/ascend.md)."""

from __future__ import annotations

import requests

from telemetry import services
from telemetry.testing import deploy_ready, undeploy


def test_mindie_pods_are_scraped_on_their_metrics_port(sandbox_cluster, db, operator):
    from topologies.tests.combinations import combination

    base = combination("mindie", "llm-datadist", "kthena")
    role = {
        "replicas": 1,
        "accelerator_resource": "huawei.com/ascend-1980",
        "accelerator_count": 1,
        "env": {"MINDIE_MODEL_NAME": base["model_name"]},
    }
    spec = combination("mindie", "llm-datadist", "kthena", roles={"prefill": role, "decode": role})
    ready = deploy_ready(sandbox_cluster, operator, prefix="mie", spec=spec)
    try:
        port = int(spec["port"])
        pod = ready.pods[0]
        assert port + 2 in pod.container_ports
        # MindIE's planes: /metrics only on metricsPort, the management API on the service port
        assert requests.get(f"http://{pod.ip}:{port}/metrics", timeout=5).status_code == 404
        assert requests.get(f"http://{pod.ip}:{port}/v1/status", timeout=5).status_code == 200
        snapshot = services.telemetry_collect(topology_id=ready.topology.pk)
        assert snapshot is not None
        scraped = [(p["name"], p["error"], p["stale"], p["engine"]) for p in snapshot["pods"]]
        assert len(scraped) >= 2 and all(e is None and not s for _, e, s, _ in scraped), scraped
    finally:
        undeploy(sandbox_cluster, ready.namespace)
