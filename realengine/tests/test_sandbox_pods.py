"""A topology deployed to the sandbox with real vLLM pods (``SANDBOX_REAL_ENGINES=vllm``): Tandem's
collection, health, pod logs and the router's P/D path run against the real engines, and a real KV
transfer (vLLM's ExampleConnector) happens between the prefill and the decode pod."""

from __future__ import annotations

import re
import time
import uuid

import pytest
import requests

import kube
from kube.labels import TOPOLOGY
from telemetry.parse import parse_metrics
from telemetry.testing import collect_intervals

pytestmark = pytest.mark.real_engine
READY_WITHIN = 300.0  # two real engines starting side by side on two cores


@pytest.fixture
def deployed(real_sandbox, db, operator):
    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = cluster_register(
        name=f"real-{uuid.uuid4().hex[:6]}", server=real_sandbox.server, token=real_sandbox.token
    )
    namespace = f"real{uuid.uuid4().hex[:8]}"
    topology = topology_create(
        cluster=cluster, spec=preset_spec("qwen-gpu-nixl", namespace=namespace), actor=operator
    )
    conn = cluster_connection(cluster)
    kube.apply_objects(conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    kube.apply_objects(conn, topology.current_revision.manifests)
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])
    deadline = time.monotonic() + READY_WITHIN
    pods: list[kube.PodInfo] = []
    while time.monotonic() < deadline:
        pods = [p for p in kube.list_pods(conn, namespace, f"{TOPOLOGY}={topology.pk}") if p.ready]
        if {p.labels.get("modelserving.volcano.sh/role") for p in pods} >= {"prefill", "decode"}:
            break
        time.sleep(1.0)
    else:
        logs = real_sandbox.kubectl(
            "logs", "-n", namespace, "-l", f"{TOPOLOGY}={topology.pk}", "--tail=20"
        ).stdout
        pytest.fail(f"real prefill and decode pods not Ready in {READY_WITHIN:.0f} s: {pods}\n{logs}")
    yield topology, conn, namespace, {p.labels["modelserving.volcano.sh/role"]: p for p in pods}
    real_sandbox.kubectl(
        "delete", "modelservings,modelservers,modelroutes,services", "--all", "-n", namespace
    )


def router_url(conn, namespace: str) -> str:
    """The P/D router of the topology's ModelRoute (the sandbox writes its address on the route)."""
    route = kube.list_objects(conn, "networking.serving.volcano.sh/v1alpha1", "ModelRoute", namespace)[0]
    return str(route["metadata"]["annotations"]["sandbox.tandem.io/router-url"])


def test_real_vllm_pods_are_collected_and_pass_kv_through_a_real_connector(deployed, real_sandbox):
    topology, conn, namespace, pods = deployed
    prefill, decode = pods["prefill"], pods["decode"]
    log = real_sandbox.kubectl("logs", "-n", namespace, decode.name).stdout
    assert f"Starting vLLM server on http://{decode.ip}:" in log  # the real engine's own log, via pods/log
    assert "ExampleConnector" in log

    before = requests.get(f"http://{decode.ip}:{decode.container_ports[0]}/metrics", timeout=10).text
    prompt = " ".join(["the cache of prefill and decode"] * 60)  # 300 tokens: two whole KV blocks
    answer = requests.post(
        f"{router_url(conn, namespace)}/v1/completions",
        json={"model": topology.model_name, "prompt": prompt, "max_tokens": 4},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    after = requests.get(f"http://{decode.ip}:{decode.container_ports[0]}/metrics", timeout=10).text

    def pulled(text: str) -> float:
        found = re.search(
            r'prompt_tokens_by_source_total\{[^}]*source="external_kv_transfer"[^}]*\} (\S+)', text
        )
        return float(found[1]) if found else 0.0

    assert pulled(after) - pulled(before) >= 128, "the decode pod computed the prompt itself"
    assert parse_metrics(after, ts=1.0)["counters"]["ext_hits"] > 0

    _, snapshot = collect_intervals(topology.pk, 2)
    rows = {row["name"]: row for row in snapshot["pods"]}
    for pod in (prefill, decode):
        row = rows[pod.name]
        assert row["engine"] == "vllm" and not row["stale"] and row["error"] is None, row
        assert row["kv_usage"] is not None and row["running"] is not None, row
        assert row["prompt_tps"] is not None, row  # the probes' prompts, at least
    assert snapshot["health"]["state"] != "down", snapshot["health"]
    (link,) = snapshot["links"]
    assert link["state"] == "up", link  # Tandem's probe went through the real pair
    details = " | ".join(source["detail"] for source in link["sources"])
    assert "hands KV over by prompt" in details, details
    assert f"{decode.name} exports no vllm:nixl_* family" in details, details  # never "0 transfers"
    after_log = real_sandbox.kubectl("logs", "-n", namespace, decode.name).stdout
    assert "External Cache Hit!" in after_log  # the connector's own line, read through pods/log
