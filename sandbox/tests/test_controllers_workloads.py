"""Deployments, ReplicaSets, pods, Services and Endpoints behave like a cluster's controllers make them."""

from __future__ import annotations

import threading
import time

import requests
from kubernetes import client
from kubernetes.client.rest import ApiException


def _deployment(name, image="busybox:1.36", replicas=2):
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "main", "image": image, "ports": [{"containerPort": 8000}]}]
                },
            },
        },
    }


def _ready(pod):
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_deployment_creates_a_replicaset_whose_pods_become_ready(sandbox_cluster, apps, core, namespace):
    apps.create_namespaced_deployment(namespace, _deployment("web"))

    def available():
        d = apps.read_namespaced_deployment("web", namespace)
        return d if d.status and d.status.available_replicas == 2 else None

    deployment = sandbox_cluster.wait_for(available, message="2 available replicas")
    assert deployment.status.ready_replicas == 2
    assert deployment.status.updated_replicas == 2
    assert deployment.status.observed_generation == deployment.metadata.generation
    conditions = {c.type: (c.status, c.reason) for c in deployment.status.conditions}
    assert conditions["Available"] == ("True", "MinimumReplicasAvailable")
    assert conditions["Progressing"] == ("True", "NewReplicaSetAvailable")
    replica_sets = apps.list_namespaced_replica_set(namespace).items
    assert len(replica_sets) == 1
    rs = replica_sets[0]
    assert rs.metadata.owner_references[0].uid == deployment.metadata.uid
    pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
    assert len(pods) == 2 and all(_ready(p) for p in pods)
    assert all(p.metadata.owner_references[0].name == rs.metadata.name for p in pods)
    assert all(
        p.metadata.labels["pod-template-hash"] == rs.metadata.labels["pod-template-hash"] for p in pods
    )
    assert len({p.status.pod_ip for p in pods}) == 2


def test_template_change_rolls_pods_onto_a_new_replicaset(sandbox_cluster, apps, core, namespace):
    apps.create_namespaced_deployment(namespace, _deployment("roll"))
    sandbox_cluster.wait_for(
        lambda: (
            (
                apps.read_namespaced_deployment("roll", namespace).status or client.V1DeploymentStatus()
            ).available_replicas
            == 2
        )
    )
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}}}
    apps.patch_namespaced_deployment("roll", namespace, patch)

    def rolled():
        d = apps.read_namespaced_deployment("roll", namespace)
        pods = core.list_namespaced_pod(namespace, label_selector="app=roll").items
        images = {p.spec.containers[0].image for p in pods}
        done = (
            d.status is not None
            and d.status.updated_replicas == 2
            and d.status.available_replicas == 2
            and images == {"busybox:1.37"}
        )
        return d if done and len(pods) == 2 else None

    deployment = sandbox_cluster.wait_for(rolled, timeout=30, message="the rollout to finish")
    assert deployment.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    replica_sets = {
        rs.metadata.annotations["deployment.kubernetes.io/revision"]: rs
        for rs in apps.list_namespaced_replica_set(namespace).items
    }
    assert replica_sets["1"].spec.replicas == 0
    assert replica_sets["2"].spec.replicas == 2


def test_scale_subresource_resizes_the_deployment(sandbox_cluster, apps, core, namespace):
    apps.create_namespaced_deployment(namespace, _deployment("scaled", replicas=1))
    scale = apps.read_namespaced_deployment_scale("scaled", namespace)
    assert scale.spec.replicas == 1
    assert scale.status.selector == "app=scaled"
    apps.patch_namespaced_deployment_scale("scaled", namespace, {"spec": {"replicas": 3}})
    sandbox_cluster.wait_for(
        lambda: (
            len(
                [
                    p
                    for p in core.list_namespaced_pod(namespace, label_selector="app=scaled").items
                    if _ready(p)
                ]
            )
            == 3
        ),
        message="three ready pods",
    )


def test_deleting_a_deployment_collects_its_replicasets_and_pods(sandbox_cluster, apps, core, namespace):
    apps.create_namespaced_deployment(namespace, _deployment("gc", replicas=1))
    sandbox_cluster.wait_for(lambda: core.list_namespaced_pod(namespace, label_selector="app=gc").items)
    apps.delete_namespaced_deployment("gc", namespace)
    sandbox_cluster.wait_for(
        lambda: (
            not apps.list_namespaced_replica_set(namespace).items
            and not core.list_namespaced_pod(namespace, label_selector="app=gc").items
        ),
        message="ReplicaSet and pods garbage-collected",
    )


def test_service_gets_a_cluster_ip_and_endpoints_of_ready_pods(sandbox_cluster, apps, core, namespace):
    apps.create_namespaced_deployment(namespace, _deployment("svc"))
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "svc"},
            "spec": {"selector": {"app": "svc"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]},
        },
    )

    def endpoints():
        try:
            ep = core.read_namespaced_endpoints("svc", namespace)
        except ApiException:
            return None
        addresses = [a for s in ep.subsets or [] for a in s.addresses or []]
        return ep if len(addresses) == 2 else None

    ep = sandbox_cluster.wait_for(endpoints, message="two ready endpoint addresses")
    assert ep.subsets[0].ports[0].port == 8000
    pods = {p.status.pod_ip for p in core.list_namespaced_pod(namespace, label_selector="app=svc").items}
    assert {a.ip for a in ep.subsets[0].addresses} == pods
    service = core.read_namespaced_service("svc", namespace)
    assert service.spec.cluster_ip.startswith("127.")


def test_engine_pod_is_running_before_ready_until_health_answers(sandbox_cluster, core, namespace):
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve", "m", "--port", "8000"],
        "env": [{"name": "SANDBOX_STARTUP_SECONDS", "value": "2"}],
    }
    core.create_namespaced_pod(
        namespace, {"metadata": {"name": "slow-start"}, "spec": {"containers": [container]}}
    )
    running = sandbox_cluster.wait_for(
        lambda: (p := core.read_namespaced_pod("slow-start", namespace)).status.phase == "Running" and p,
        message="Running",
    )
    assert not _ready(running)
    ready = sandbox_cluster.wait_for(
        lambda: _ready(core.read_namespaced_pod("slow-start", namespace)), timeout=15
    )
    assert ready
    ip = core.read_namespaced_pod("slow-start", namespace).status.pod_ip
    assert requests.get(f"http://{ip}:8000/health", timeout=5).status_code == 200


def test_deleted_engine_pod_is_terminating_while_in_flight_requests_finish(sandbox_cluster, core, namespace):
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve", "m", "--port", "8000"],
        "env": [{"name": "SANDBOX_DECODE_STEP_MS", "value": "25"}],
    }
    pod = {
        "metadata": {"name": "drain"},
        "spec": {"terminationGracePeriodSeconds": 30, "containers": [container]},
    }
    core.create_namespaced_pod(namespace, pod)
    sandbox_cluster.wait_for(lambda: _ready(core.read_namespaced_pod("drain", namespace)), message="Ready")
    ip = core.read_namespaced_pod("drain", namespace).status.pod_ip
    result = {}

    def long_request():
        response = requests.post(
            f"http://{ip}:8000/v1/completions",
            json={"model": "m", "prompt": "drain me", "max_tokens": 80, "ignore_eos": True},
            timeout=30,
        )
        result["status"] = response.status_code
        result["body"] = response.json()

    worker = threading.Thread(target=long_request)
    worker.start()
    time.sleep(0.4)
    core.delete_namespaced_pod("drain", namespace)
    terminating = core.read_namespaced_pod("drain", namespace)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.status.phase == "Running"
    listing = sandbox_cluster.kubectl("get", "pod", "drain", "-n", namespace)
    assert "Terminating" in listing.stdout
    worker.join(30)
    assert result["status"] == 200
    assert result["body"]["usage"]["completion_tokens"] == 80

    def gone():
        try:
            core.read_namespaced_pod("drain", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    sandbox_cluster.wait_for(gone, message="the pod removed after draining")


def test_host_network_pods_share_the_node_address_and_its_ports():
    from sandbox.testing import SandboxCluster

    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.10.1",
        "command": ["vllm", "serve", "m", "--port", "7100"],
        "ports": [{"containerPort": 7100}],
    }
    with SandboxCluster(nodes=1, kthena=False) as cluster:
        core = client.CoreV1Api(cluster.api_client())
        for name in ("first", "second"):
            pod = {"metadata": {"name": name}, "spec": {"hostNetwork": True, "containers": [container]}}
            core.create_namespaced_pod("default", pod)
        first = cluster.wait_for(lambda: _ready(p := core.read_namespaced_pod("first", "default")) and p)
        assert first.status.pod_ip == first.status.host_ip
        assert requests.get(f"http://{first.status.pod_ip}:7100/health", timeout=5).status_code == 200
        message = cluster.wait_for(
            lambda: next(
                (
                    c.message
                    for c in core.read_namespaced_pod("second", "default").status.conditions or []
                    if c.type == "PodScheduled"
                ),
                None,
            )
        )
        assert message.startswith(
            "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
        )
