"""The isolated pod network: pods unreachable from the host, reached through the API server's proxy
subresources, and LoadBalancer Services with a host-reachable external address."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid

import pytest
import requests
from kubernetes import client

from sandbox.netns import PREFIX, leftover_namespaces
from sandbox.testing import SandboxCluster

MODEL = "qwen-sim"


def _engine(name: str, role: str) -> dict:
    labels = {"tandem.io/topology": "9", "tandem.io/role": role}
    config = json.dumps(
        {"kv_connector": "NixlConnector", "kv_role": f"kv_{'producer' if role == 'prefill' else 'consumer'}"}
    )
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "engine",
                            "image": "vllm/vllm-openai:v0.10.1",
                            "command": [
                                "vllm",
                                "serve",
                                MODEL,
                                "--port",
                                "8000",
                                "--kv-transfer-config",
                                config,
                            ],
                            "ports": [{"name": "http", "containerPort": 8000}],
                            "resources": {"limits": {"huawei.com/ascend-1980": "1"}},
                        }
                    ]
                },
            },
        },
    }


def _service(name: str, selector: dict, **extra: object) -> dict:
    spec = {"selector": selector, "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]}
    return {"metadata": {"name": name, **extra.pop("meta", {})}, "spec": {**spec, **extra}}  # type: ignore[dict-item]


@pytest.fixture(scope="module")
def deployed(sandbox_cluster_isolated):
    cluster = sandbox_cluster_isolated
    api = cluster.api_client()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    namespace = f"podnet-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    for role in ("prefill", "decode"):
        apps.create_namespaced_deployment(namespace, _engine(f"pd-{role}", role))
        core.create_namespaced_service(
            namespace, _service(f"pd-{role}", {"tandem.io/topology": "9", "tandem.io/role": role})
        )
    router_meta = {
        "labels": {"tandem.io/topology": "9", "tandem.io/role": "router"},
        "annotations": {
            "tandem.io/prefill-service": "pd-prefill",
            "tandem.io/decode-service": "pd-decode",
            "tandem.io/model": MODEL,
        },
    }
    core.create_namespaced_service(
        namespace,
        _service("pd-router", {"tandem.io/role": "router"}, type="LoadBalancer", meta=router_meta),
    )

    def ready_pods():
        pods = core.list_namespaced_pod(namespace).items
        ready = [
            p
            for p in pods
            if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        return ready if len(ready) == 2 else None

    pods = cluster.wait_for(ready_pods, timeout=60, message="prefill and decode Ready")
    yield cluster, core, namespace, {p.metadata.labels["tandem.io/role"]: p for p in pods}
    core.delete_namespace(namespace)


def _get(cluster: SandboxCluster, path: str) -> requests.Response:
    return requests.get(
        cluster.server + path, headers={"Authorization": f"Bearer {cluster.token}"}, timeout=10
    )


def test_pod_ips_are_not_reachable_from_the_host(deployed):
    _, _, _, pods = deployed
    ip = pods["decode"].status.pod_ip
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://{ip}:8000/metrics", timeout=2)


def test_pods_proxy_reaches_the_engine_and_passes_status_and_body_through(deployed):
    cluster, _, namespace, pods = deployed
    name = pods["decode"].metadata.name
    metrics = _get(cluster, f"/api/v1/namespaces/{namespace}/pods/{name}:8000/proxy/metrics")
    assert metrics.status_code == 200
    assert "vllm:num_requests_running" in metrics.text
    assert metrics.headers["Content-Type"].startswith("text/plain")
    named = _get(cluster, f"/api/v1/namespaces/{namespace}/pods/http:{name}:http/proxy/health")
    assert named.status_code == 200
    missing = _get(cluster, f"/api/v1/namespaces/{namespace}/pods/{name}:8000/proxy/no/such/path")
    assert missing.status_code == 404  # the engine's own 404, not the API server's
    assert "kind" not in missing.text


def test_proxy_errors_are_status_objects(deployed):
    cluster, _, namespace, pods = deployed
    name = pods["decode"].metadata.name
    gone = _get(cluster, f"/api/v1/namespaces/{namespace}/pods/nope:8000/proxy/metrics")
    assert gone.status_code == 404
    assert gone.json()["reason"] == "NotFound" and gone.json()["message"] == 'pods "nope" not found'
    refused = _get(cluster, f"/api/v1/namespaces/{namespace}/pods/{name}/proxy/metrics")  # port 80
    assert refused.status_code == 503
    body = refused.json()
    assert body["kind"] == "Status" and body["reason"] == "ServiceUnavailable"
    assert f"dial tcp {pods['decode'].status.pod_ip}:80: connect: connection refused" in body["message"]
    no_token = requests.get(
        cluster.server + f"/api/v1/namespaces/{namespace}/pods/{name}:8000/proxy/metrics", timeout=5
    )
    assert no_token.status_code == 401


def test_services_proxy_goes_to_a_ready_endpoint(deployed):
    cluster, _, namespace, _ = deployed
    health = _get(cluster, f"/api/v1/namespaces/{namespace}/services/pd-decode:http/proxy/health")
    assert health.status_code == 200
    models = _get(cluster, f"/api/v1/namespaces/{namespace}/services/pd-decode/proxy/v1/models")
    assert models.status_code == 200 and models.json()["data"][0]["id"] == MODEL
    wrong = _get(cluster, f"/api/v1/namespaces/{namespace}/services/pd-decode:9999/proxy/health")
    assert wrong.status_code == 400 and wrong.json()["kind"] == "Status"


def test_kubectl_reads_metrics_through_the_pods_proxy(deployed):
    cluster, _, namespace, pods = deployed
    name = pods["prefill"].metadata.name
    done = cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/pods/{name}:8000/proxy/metrics")
    assert done.returncode == 0, done.stderr
    assert "vllm:prompt_tokens_total" in done.stdout


def test_load_balancer_service_gets_a_host_reachable_external_address(deployed):
    cluster, core, namespace, pods = deployed

    def ingress():
        status = core.read_namespaced_service("pd-router", namespace).status
        lb = status.load_balancer.ingress if status and status.load_balancer else None
        return lb[0].ip if lb else None

    ip = cluster.wait_for(ingress, message="an external address")
    assert ip not in {p.status.pod_ip for p in pods.values()}
    answer = requests.post(
        f"http://{ip}:8000/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["completion_tokens"] == 3


def test_plain_load_balancer_service_forwards_to_its_endpoints(deployed):
    cluster, core, namespace, _ = deployed
    core.create_namespaced_service(
        namespace,
        _service("decode-lb", {"tandem.io/topology": "9", "tandem.io/role": "decode"}, type="LoadBalancer"),
    )

    def ingress():
        status = core.read_namespaced_service("decode-lb", namespace).status
        lb = status.load_balancer.ingress if status and status.load_balancer else None
        return lb[0].ip if lb else None

    ip = cluster.wait_for(ingress, message="an external address")
    assert requests.get(f"http://{ip}:8000/health", timeout=5).status_code == 200
    core.delete_namespaced_service("decode-lb", namespace)

    def closed():
        try:
            requests.get(f"http://{ip}:8000/health", timeout=1)
        except requests.ConnectionError:
            return True
        return False

    cluster.wait_for(closed, message="the forwarder closed with its Service")


def _netns_names() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.startswith(PREFIX)}


def test_namespace_removed_on_exit_and_leftovers_of_a_killed_sandbox_removed_at_next_start():
    first = SandboxCluster(nodes=1, pod_network="isolated").start()
    assert first.netns in _netns_names()
    process = first._process
    assert process is not None
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert first.netns in leftover_namespaces()
    first._process = None
    first._tmp.cleanup()
    with SandboxCluster(nodes=1, pod_network="isolated") as second:
        assert first.netns not in _netns_names()
        assert second.netns in _netns_names()
    assert second.netns not in _netns_names()
