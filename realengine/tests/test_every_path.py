"""One topology on real vLLM pods, driven through every path Tandem uses: the product's deploy, the
gateway through the discovered router, a real KV transfer between the pair (vLLM's ExampleConnector),
the verification probes, metrics by the API server's proxy and by a real Prometheus, link health,
drift, and a failed deploy diagnosed from the real engine's own error and rolled back while the
previous revision keeps serving. One pair of real engines for all of it: each start takes both cores
for a minute."""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest
import requests

from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now, ready_pods
from realengine.engine import CONTEXT
from telemetry.parse import parse_metrics
from telemetry.testing import collect_intervals

pytestmark = pytest.mark.real_engine


@pytest.fixture
def real_deploys(settings):
    settings.DEPLOY_POLL_SECONDS = 0.5
    settings.DEPLOY_READY_TIMEOUT_SECONDS = 300  # two real engines starting side by side on two cores


def _pods(topology, conn) -> dict[str, object]:
    import kube
    from kube.labels import ROLE, topology_selector

    pods = kube.list_pods(conn, topology.namespace, topology_selector(topology.pk))
    return {
        p.labels[ROLE]: p
        for p in pods
        if p.ready and not p.deletion_pending and p.labels.get(ROLE) in ("prefill", "decode")
    }


def _serve(topology_id: int, text: str) -> object:
    from gateway import inprocess
    from gateway.routes import load_table

    entry = next(e for e in load_table("real").entries() if e.topology_id == topology_id)
    return asyncio.run(inprocess.chat(entry, [{"role": "user", "content": text}], max_tokens=4))


def _pulled(metrics: str) -> float:
    """The decode engine's prompt tokens received through the KV connector, from its own counter."""
    found = re.search(
        r'prompt_tokens_by_source_total\{[^}]*source="external_kv_transfer"[^}]*\} (\S+)', metrics
    )
    return float(found[1]) if found else 0.0


def _kv_passes_through_the_real_connector(real_sandbox, router: str, topology, namespace: str, pods) -> None:
    """A real KV transfer (vLLM's ExampleConnector) between the prefill and the decode pod, through the
    router: the decode engine counts the prompt as received, not computed, and says so in its own log."""
    decode = pods["decode"]
    log = real_sandbox.kubectl("logs", "-n", namespace, decode.name).stdout
    assert f"Starting vLLM server on http://{decode.ip}:" in log  # the real engine's own log, via pods/log
    assert "ExampleConnector" in log
    metrics_url = f"http://{decode.ip}:{decode.container_ports[0]}/metrics"
    before = requests.get(metrics_url, timeout=10).text
    prompt = " ".join(["the cache of prefill and decode"] * 60)  # 300 tokens: two whole KV blocks
    answer = requests.post(
        f"{router}/v1/completions",
        json={"model": topology.model_name, "prompt": prompt, "max_tokens": 4},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    after = requests.get(metrics_url, timeout=10).text
    assert _pulled(after) - _pulled(before) >= 128, "the decode pod computed the prompt itself"
    assert parse_metrics(after, ts=1.0)["counters"]["ext_hits"] > 0
    assert "External Cache Hit!" in real_sandbox.kubectl("logs", "-n", namespace, decode.name).stdout


def test_a_topology_on_real_vllm_pods_through_every_path(
    real_sandbox, real_deploys, transactional_db, operator
):
    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register, cluster_set_metrics_source
    from deployments.services import topology_drift_check
    from gateway.models import ProbeRun, Route
    from gateway.services import probe_run_execute, probe_run_start, routes_discover
    from sandbox.monitoring import SandboxPrometheus
    from topologies.presets import preset_spec
    from topologies.services import topology_create, topology_update

    cluster = cluster_register(
        name=f"real-{uuid.uuid4().hex[:6]}", server=real_sandbox.server, token=real_sandbox.token
    )
    namespace = f"every{uuid.uuid4().hex[:6]}"
    spec = preset_spec("qwen-gpu-nixl", namespace=namespace, backend="deployments")
    topology = topology_create(cluster=cluster, spec=spec, actor=operator)
    conn = cluster_connection(cluster)

    # The product's deploy: preflight, apply, wait for the real engines to be Ready.
    first = deploy_now(topology, operator)
    assert first.state == State.SUCCEEDED, (first.error, first.diagnosis)
    pods = _pods(topology, conn)
    assert {"prefill", "decode"} <= set(pods), pods

    # The gateway finds the router in the cluster and serves through it: prefill, KV, decode, all real.
    assert routes_discover() >= 1
    assert Route.objects.get(topology=topology).discovered_url.startswith("http://127.")
    answer = _serve(topology.pk, "hello through the gateway")
    assert answer.status == 200 and answer.backend == "cluster" and answer.text, answer
    router = Route.objects.get(topology=topology).discovered_url
    _kv_passes_through_the_real_connector(real_sandbox, router, topology, namespace, pods)

    # Metrics through the API server's pods proxy: every pod read, the real pair's link up.
    cluster = cluster_set_metrics_source(cluster=cluster, metrics_source="proxy")
    snapshot = collect_intervals(topology.pk, 3)[-1]
    rows = {row["name"]: row for row in snapshot["pods"]}
    for pod in pods.values():
        row = rows[pod.name]  # type: ignore[attr-defined]
        assert not row["stale"] and row["error"] is None and row["kv_usage"] is not None, row
        assert row["engine"] == "vllm" and row["running"] is not None and row["prompt_tps"] is not None, row
    assert snapshot["health"]["state"] != "down", snapshot["health"]
    (link,) = snapshot["links"]
    assert link["state"] == "up", link  # Tandem's probe went through the real pair
    details = " | ".join(source["detail"] for source in link["sources"])
    assert "hands KV over by prompt" in details, details
    assert f"{pods['decode'].name} exports no vllm:nixl_* family" in details, details  # never "0 transfers"

    # Verification probes, as the worker runs them (the links probe reads what telemetry saw). Not the
    # prefix probe: it judges reuse by TTFT, and the tiny model prefills 400 words in a few milliseconds
    # beside the connector's file I/O, so no TTFT shows reuse here (docs/real-engines.md).
    run = probe_run_start(
        topology=topology,
        kinds=["smoke", "concurrency", "links"],
        params={
            "concurrency_clients": 2,
            "concurrency_seconds": 3,
        },
        actor=operator,
    )
    probe_run_execute(run_id=run.pk)
    run = ProbeRun.objects.get(pk=run.pk)
    assert run.state == "passed", [(r["name"], r["summary"], r["diagnosis"]) for r in run.results]

    # Metrics through a real Prometheus scraping the real engines.
    with SandboxPrometheus(real_sandbox, scrape_interval="1s") as prometheus:
        prometheus.wait_for_targets(namespace, 2)
        cluster = cluster_set_metrics_source(
            cluster=cluster, metrics_source="prometheus", prometheus_url=prometheus.url
        )
        snapshot = collect_intervals(topology.pk, 2)[-1]
    rows = {row["name"]: row for row in snapshot["pods"]}
    for pod in pods.values():
        row = rows[pod.name]  # type: ignore[attr-defined]
        assert not row["stale"] and row["error"] is None and row["running"] is not None, row
    assert snapshot["health"]["state"] != "stale", snapshot["health"]

    # Drift: someone relabels the decode Deployment by hand (its pods, and their engine, keep running).
    decode = next(
        obj
        for obj in topology.deployed_revision.manifests
        if obj["kind"] == "Deployment" and "decode" in obj["metadata"]["name"]
    )
    label = next(key for key in decode["metadata"]["labels"] if key != "tandem.io/topology")
    name, value = decode["metadata"]["name"], decode["metadata"]["labels"][label]
    real_sandbox.kubectl("label", "deployment", name, f"{label}=by-hand", "--overwrite", "-n", namespace)
    try:
        differences = topology_drift_check(topology=topology)
        assert [d["path"] for d in differences] == [f"metadata.labels.{label}"], differences
        assert differences[0]["live"] == "by-hand", differences
    finally:
        real_sandbox.kubectl("label", "deployment", name, f"{label}={value}", "--overwrite", "-n", namespace)
    assert topology_drift_check(topology=topology) == []

    # A revision the real engine refuses: diagnosed from its own error, rolled back, still serving.
    changed = dict(topology.spec)
    changed["roles"] = {**changed["roles"]}
    decode_role = changed["roles"]["decode"]
    longer = [*decode_role.get("extra_args", []), "--max-model-len", str(CONTEXT * 2)]
    changed["roles"]["decode"] = {**decode_role, "extra_args": longer}
    topology = topology_update(topology=topology, spec=changed, actor=operator, message="longer context")
    failed = deploy_now(topology, operator)
    assert failed.state == State.ROLLED_BACK, (failed.state, failed.error, failed.diagnosis)
    assert failed.diagnosis and failed.diagnosis[0]["code"] == "crash_loop", failed.diagnosis
    assert "max_model_len" in failed.diagnosis[0]["message"], failed.diagnosis  # vLLM's own words
    assert topology.deployed_revision.number == 1
    assert len(ready_pods(conn, topology, 1)) >= 2
    answer = _serve(topology.pk, "still served by revision 1")
    assert answer.status == 200 and answer.backend == "cluster", answer
    real_sandbox.kubectl("delete", "deployments,services", "--all", "-n", namespace)  # its engines stop
