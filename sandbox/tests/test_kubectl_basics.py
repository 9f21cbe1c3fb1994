"""Everyday kubectl against the sandbox: imperative creates, apply, rollout, wait, get/describe, delete."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid

import pytest

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:IMAGE_TAG
        ports: [{containerPort: 8080}]
"""


def _ok(result):
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return result.stdout


@pytest.fixture
def namespace(sandbox_cluster):
    name = f"kc-{uuid.uuid4().hex[:8]}"
    assert _ok(sandbox_cluster.kubectl("create", "namespace", name)).strip() == f"namespace/{name} created"
    yield name
    sandbox_cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_imperative_creates_of_simple_kinds(sandbox_cluster, namespace):
    _ok(
        sandbox_cluster.kubectl(
            "create", "configmap", "cfg", "-n", namespace, "--from-literal=a=1", "--from-literal=b=2"
        )
    )
    _ok(
        sandbox_cluster.kubectl(
            "create", "secret", "generic", "creds", "-n", namespace, "--from-literal=token=s3cret"
        )
    )
    _ok(sandbox_cluster.kubectl("create", "serviceaccount", "robot", "-n", namespace))
    cfg = json.loads(_ok(sandbox_cluster.kubectl("get", "configmap", "cfg", "-n", namespace, "-o", "json")))
    assert cfg["data"] == {"a": "1", "b": "2"}
    secret = json.loads(_ok(sandbox_cluster.kubectl("get", "secret", "creds", "-n", namespace, "-o", "json")))
    assert secret["data"] == {"token": "czNjcmV0"}
    assert secret["type"] == "Opaque"
    ns = json.loads(_ok(sandbox_cluster.kubectl("get", "namespace", namespace, "-o", "json")))
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == namespace
    refused = sandbox_cluster.kubectl("create", "deployment", "d", "--image=nginx", "-n", namespace)
    assert refused.returncode != 0
    assert "apply a manifest instead" in refused.stderr


def test_apply_rollout_status_and_wait(sandbox_cluster, namespace):
    out = _ok(
        sandbox_cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=DEPLOYMENT.replace("IMAGE_TAG", "1.27")
        )
    )
    assert "deployment.apps/web created" in out
    _ok(sandbox_cluster.kubectl("rollout", "status", "deployment/web", "-n", namespace, "--timeout=30s"))
    _ok(
        sandbox_cluster.kubectl(
            "wait", "--for=condition=Ready", "pod", "-l", "app=web", "-n", namespace, "--timeout=30s"
        )
    )
    out = _ok(
        sandbox_cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=DEPLOYMENT.replace("IMAGE_TAG", "1.28")
        )
    )
    assert "deployment.apps/web configured" in out
    _ok(sandbox_cluster.kubectl("rollout", "status", "deployment/web", "-n", namespace, "--timeout=30s"))
    images = _ok(
        sandbox_cluster.kubectl(
            "get",
            "pods",
            "-n",
            namespace,
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].spec.containers[0].image}",
        )
    )
    assert set(images.split()) == {"nginx:1.28"}
    table = _ok(sandbox_cluster.kubectl("get", "deployment", "web", "-n", namespace))
    assert table.split()[:5] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table.split()[5:9] == ["web", "2/2", "2", "2"]


def test_describe_nodes_and_label_selection(sandbox_cluster, namespace):
    nodes = _ok(sandbox_cluster.kubectl("get", "nodes"))
    assert nodes.count("Ready") == 4
    described = _ok(sandbox_cluster.kubectl("describe", "node", "sandbox-node-1"))
    assert "huawei.com/ascend-1980:  8" in described
    _ok(
        sandbox_cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", input=DEPLOYMENT.replace("IMAGE_TAG", "1.27")
        )
    )
    _ok(
        sandbox_cluster.kubectl(
            "wait", "--for=condition=Ready", "pod", "-l", "app=web", "-n", namespace, "--timeout=30s"
        )
    )
    names = _ok(
        sandbox_cluster.kubectl("get", "pods", "-n", namespace, "-l", "app in (web)", "-o", "name")
    ).split()
    assert len(names) == 2
    none = _ok(sandbox_cluster.kubectl("get", "pods", "-n", namespace, "-l", "app!=web", "-o", "name"))
    assert none.strip() == ""
    running = _ok(
        sandbox_cluster.kubectl(
            "get", "pods", "-n", namespace, "--field-selector=status.phase=Running", "-o", "name"
        )
    )
    assert len(running.split()) == 2


def test_delete_and_not_found(sandbox_cluster, namespace):
    _ok(sandbox_cluster.kubectl("create", "configmap", "doomed", "-n", namespace))
    assert 'configmap "doomed" deleted' in _ok(
        sandbox_cluster.kubectl("delete", "configmap", "doomed", "-n", namespace)
    )
    missing = sandbox_cluster.kubectl("get", "configmap", "doomed", "-n", namespace)
    assert missing.returncode != 0
    assert 'configmaps "doomed" not found' in missing.stderr


def test_logs_follow_streams_until_the_pod_is_gone(sandbox_cluster, namespace):
    pod = """\
apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.10.1
    command: ["vllm", "serve", "m", "--port", "8000"]
"""
    _ok(sandbox_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=pod))
    _ok(
        sandbox_cluster.kubectl(
            "wait", "--for=condition=Ready", "pod/talker", "-n", namespace, "--timeout=30s"
        )
    )
    follower = subprocess.Popen(
        [
            "/usr/bin/kubectl",
            "--kubeconfig",
            str(sandbox_cluster.kubectl_kubeconfig_path),
            "logs",
            "-f",
            "talker",
            "-n",
            namespace,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    threading.Timer(
        1.5, lambda: sandbox_cluster.kubectl("delete", "pod", "talker", "-n", namespace, "--wait=false")
    ).start()
    out, _ = follower.communicate(timeout=30)
    assert follower.returncode == 0
    assert "Starting vLLM API server" in out
