"""P/D routers materialised from a Kthena ModelServer + ModelRoute and from a plain router Service."""

from __future__ import annotations

import json
from pathlib import Path

import requests
import yaml
from kubernetes import client

DATA = Path(__file__).parent / "data"
NET = ("networking.serving.volcano.sh", "v1alpha1")
URL = "sandbox.tandem.io/router-url"


def _load(name, namespace):
    doc = yaml.safe_load((DATA / name).read_text())
    doc["metadata"]["namespace"] = namespace
    return doc


def _chat(url, model):
    return requests.post(
        f"{url}/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hello sandbox"}], "max_tokens": 4},
        timeout=30,
    )


def _all_ready(core, namespace, count):
    pods = core.list_namespaced_pod(namespace).items
    ready = [
        p for p in pods if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]
    return len(ready) == count


def test_model_route_gets_a_router_that_pairs_prefill_and_decode(sandbox_cluster, core, namespace):
    custom = client.CustomObjectsApi(sandbox_cluster.api_client())
    serving = _load("model-serving__prefill-decode-disaggregation.yaml", namespace)
    custom.create_namespaced_custom_object(
        "workload.serving.volcano.sh", "v1alpha1", namespace, "modelservings", serving
    )
    server = _load("kthena-router__ModelServer-prefill-decode-disaggregation.yaml", namespace)
    route = _load("kthena-router__ModelRoute-prefill-decode-disaggregation.yaml", namespace)
    custom.create_namespaced_custom_object(*NET, namespace, "modelservers", server)
    custom.create_namespaced_custom_object(*NET, namespace, "modelroutes", route)
    sandbox_cluster.wait_for(lambda: _all_ready(core, namespace, 2), message="prefill and decode Ready")
    url = sandbox_cluster.wait_for(
        lambda: (
            custom.get_namespaced_custom_object(*NET, namespace, "modelroutes", "deepseek-v2")[
                "metadata"
            ].get("annotations")
            or {}
        ).get(URL),
        message="the router URL on the ModelRoute",
    )
    assert url.startswith("http://127.") and url.endswith(":8080")
    server_url = custom.get_namespaced_custom_object(*NET, namespace, "modelservers", "deepseek-v2")[
        "metadata"
    ]["annotations"][URL]
    assert server_url == url
    response = _chat(url, "deepseek-ai/DeepSeekV2")
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == 4
    decode_ip = core.read_namespaced_pod("deepseek-v2-lite-0-decode-0-0", namespace).status.pod_ip
    decode_metrics = requests.get(f"http://{decode_ip}:8000/metrics", timeout=5).text
    assert "vllm:request_success_total" in decode_metrics
    router_metrics = requests.get(f"{url}/metrics", timeout=5).text
    assert 'status_code="200"' in router_metrics


def _engine_deployment(name, role, model):
    kv = {"prefill": "kv_producer", "decode": "kv_consumer"}[role]
    config = json.dumps({"kv_connector": "NixlConnector", "kv_role": kv})
    labels = {"tandem.io/topology": "7", "tandem.io/role": role}
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
                                model,
                                "--port",
                                "8000",
                                "--kv-transfer-config",
                                config,
                            ],
                            "ports": [{"containerPort": 8000}],
                            "resources": {"limits": {"huawei.com/ascend-1980": "1"}},
                        }
                    ]
                },
            },
        },
    }


def test_router_service_of_the_plain_backend_gets_a_load_balancer_address(sandbox_cluster, core, namespace):
    apps = client.AppsV1Api(sandbox_cluster.api_client())
    model = "qwen-sim"
    for role in ("prefill", "decode"):
        apps.create_namespaced_deployment(namespace, _engine_deployment(f"pd-{role}", role, model))
        core.create_namespaced_service(
            namespace,
            {
                "metadata": {"name": f"pd-{role}"},
                "spec": {
                    "clusterIP": "None",
                    "selector": {"tandem.io/topology": "7", "tandem.io/role": role},
                    "ports": [{"port": 8000}],
                },
            },
        )
    router = {
        "metadata": {
            "name": "pd-router",
            "labels": {"tandem.io/topology": "7", "tandem.io/role": "router"},
            "annotations": {
                "tandem.io/prefill-service": "pd-prefill",
                "tandem.io/decode-service": "pd-decode",
                "tandem.io/model": model,
                "tandem.io/timeout-seconds": "30",
                "tandem.io/retry-attempts": "1",
                "tandem.io/retry-interval-ms": "100",
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "selector": {"tandem.io/topology": "7", "tandem.io/role": "router"},
            "ports": [{"port": 8000}],
        },
    }
    core.create_namespaced_service(namespace, router)
    sandbox_cluster.wait_for(lambda: _all_ready(core, namespace, 2), message="prefill and decode Ready")

    def ingress():
        status = core.read_namespaced_service("pd-router", namespace).status
        lb = status.load_balancer.ingress if status and status.load_balancer else None
        return lb[0].ip if lb else None

    ip = sandbox_cluster.wait_for(ingress, message="a load-balancer address")
    service = core.read_namespaced_service("pd-router", namespace)
    assert service.metadata.annotations[URL] == f"http://{ip}:8000"
    response = _chat(f"http://{ip}:8000", model)
    assert response.status_code == 200, response.text
    models = requests.get(f"http://{ip}:8000/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == [model]
    core.delete_namespaced_service("pd-router", namespace)
    sandbox_cluster.wait_for(
        lambda: _refused(f"http://{ip}:8000/health"), message="the router gone with its Service"
    )


def test_a_cluster_ip_router_service_gets_no_external_address(sandbox_cluster, core, namespace):
    """As on a real cluster: only a LoadBalancer Service gets status.loadBalancer.ingress."""
    router = {
        "metadata": {
            "name": "inside",
            "labels": {"tandem.io/topology": "8", "tandem.io/role": "router"},
            "annotations": {"tandem.io/model": "m"},
        },
        "spec": {
            "selector": {"tandem.io/topology": "8", "tandem.io/role": "router"},
            "ports": [{"port": 8000}],
        },
    }
    core.create_namespaced_service(namespace, router)
    sandbox_cluster.wait_for(
        lambda: URL in (core.read_namespaced_service("inside", namespace).metadata.annotations or {}),
        message="the router started",
    )
    status = core.read_namespaced_service("inside", namespace).status
    assert not (status and status.load_balancer and status.load_balancer.ingress)


def _refused(url):
    try:
        requests.get(url, timeout=1)
    except requests.ConnectionError:
        return True
    except requests.Timeout:  # still shutting down: ask again
        return False
    return False
