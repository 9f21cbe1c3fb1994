"""The sandbox process: kubeconfigs, separate address blocks, clean stop; engine crashes and restarts."""

from __future__ import annotations

import uuid

import requests
import yaml
from kubernetes import client

from sandbox.testing import SandboxCluster


def test_two_sandboxes_hand_out_pod_addresses_from_different_blocks(sandbox_cluster):
    pod = {
        "metadata": {"name": f"p-{uuid.uuid4().hex[:6]}"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    blocks = []
    with SandboxCluster(nodes=1, kthena=False) as second:
        for cluster in (sandbox_cluster, second):
            core = client.CoreV1Api(cluster.api_client())
            core.create_namespaced_pod("default", pod)
            name = pod["metadata"]["name"]
            ip = cluster.wait_for(
                lambda core=core, name=name: core.read_namespaced_pod(name, "default").status.pod_ip
            )
            blocks.append(ip.split(".")[1])
            if cluster is sandbox_cluster:
                core.delete_namespaced_pod(name, "default")
    assert blocks[0] != blocks[1]


def test_sigterm_stops_the_sandbox_within_seconds_with_engines_running(tmp_path):
    cluster = SandboxCluster(nodes=1, kthena=False, accelerators=["nvidia.com/gpu=8"]).start()
    try:
        config = yaml.safe_load(cluster.kubeconfig_path.read_text())
        assert config["clusters"][0]["cluster"]["server"] == cluster.server
        assert cluster.kubectl_kubeconfig_path.is_file()
        node = client.CoreV1Api(cluster.api_client()).list_node().items[0]
        assert node.status.capacity["nvidia.com/gpu"] == "8"
        core = client.CoreV1Api(cluster.api_client())
        container = {
            "name": "vllm",
            "image": "vllm/vllm-openai:v0.10.1",
            "command": ["vllm", "serve", "m", "--port", "8000"],
        }
        core.create_namespaced_pod(
            "default", {"metadata": {"name": "engine"}, "spec": {"containers": [container]}}
        )
        cluster.wait_for(
            lambda: any(
                s.ready for s in core.read_namespaced_pod("engine", "default").status.container_statuses or []
            )
        )
        server = cluster.server
    finally:
        code = cluster.stop()  # SIGTERM, then a kill after 10 s: exit code 0 means it stopped by itself
    assert code == 0, (
        "the sandbox did not stop by itself within 10 s of SIGTERM (timings: bench/sandbox_lifecycle.py)"
    )
    assert "sandbox stopped" in cluster.output
    try:
        requests.get(f"{server}/version", timeout=1)
    except requests.ConnectionError:
        pass
    else:
        raise AssertionError("the API server still answers after SIGTERM")


def test_crashed_engine_is_restarted_and_becomes_ready_again(sandbox_cluster):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    namespace = f"crash-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        container = {
            "name": "vllm",
            "image": "vllm/vllm-openai:v0.10.1",
            "command": ["vllm", "serve", "m", "--port", "8000"],
        }
        core.create_namespaced_pod(
            namespace, {"metadata": {"name": "engine"}, "spec": {"containers": [container]}}
        )

        def status():
            statuses = core.read_namespaced_pod("engine", namespace).status.container_statuses
            return (
                statuses[0]
                if statuses
                else client.V1ContainerStatus(
                    name="vllm", image="", image_id="", ready=False, restart_count=0
                )
            )

        sandbox_cluster.wait_for(lambda: status().ready, message="Ready")
        ip = core.read_namespaced_pod("engine", namespace).status.pod_ip
        response = requests.post(f"http://{ip}:8000/sandbox/faults", json={"kind": "crash"}, timeout=5)
        assert response.status_code < 300, response.text
        sandbox_cluster.wait_for(lambda: status().restart_count == 1, message="one restart")
        assert status().last_state.terminated is not None
        sandbox_cluster.wait_for(lambda: status().ready, timeout=20, message="Ready again after the restart")
        assert any(e.reason == "BackOff" for e in core.list_namespaced_event(namespace).items)
    finally:
        core.delete_namespace(namespace)
