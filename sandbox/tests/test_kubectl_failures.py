"""What kubectl shows for each failure mode, for a stale write, and while watching."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest

PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: unpullable}
spec:
  containers:
  - {name: vllm, image: "vllm/vllm-openai:v0.10.1-broken", command: [vllm, serve, m]}
---
apiVersion: v1
kind: Pod
metadata: {name: bad-flag}
spec:
  containers:
  - {name: vllm, image: "vllm/vllm-openai:v0.10.1", command: [vllm, serve, m, --max-model-len, lots]}
---
apiVersion: v1
kind: Pod
metadata: {name: no-master}
spec:
  containers:
  - name: vllm
    image: "vllm/vllm-openai:v0.10.1"
    command:
    - vllm
    - serve
    - m
    - --kv-transfer-config
    - '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'
    env: [{name: MOONCAKE_MASTER, value: "mooncake-master.sandbox-infra:50051"}]
---
apiVersion: v1
kind: Pod
metadata: {name: no-config}
spec:
  containers:
  - name: vllm
    image: "vllm/vllm-openai:v0.10.1"
    command: [vllm, serve, m]
    volumeMounts: [{name: cfg, mountPath: /etc/cfg}]
  volumes: [{name: cfg, secret: {secretName: engine-credentials}}]
---
apiVersion: v1
kind: Pod
metadata: {name: wrong-accelerator}
spec:
  containers:
  - name: vllm
    image: "vllm/vllm-openai:v0.10.1"
    command: [vllm, serve, m]
    resources: {limits: {nvidia.com/gpu: "1"}}
"""
EXPECTED = {
    "unpullable": {"ErrImagePull", "ImagePullBackOff"},
    "bad-flag": {"CrashLoopBackOff"},
    "no-master": {"CrashLoopBackOff"},
    "no-config": {"ContainerCreating"},
    "wrong-accelerator": {"Pending"},
}


def _ok(result):
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def failing(sandbox_cluster):
    namespace = f"kf-{uuid.uuid4().hex[:8]}"
    _ok(sandbox_cluster.kubectl("create", "namespace", namespace))
    _ok(sandbox_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=PODS))

    def statuses():
        rows = _ok(sandbox_cluster.kubectl("get", "pods", "-n", namespace, "--no-headers")).splitlines()
        found = {row.split()[0]: row.split()[2] for row in rows}
        return found if all(found.get(name) in want for name, want in EXPECTED.items()) else None

    sandbox_cluster.wait_for(statuses, timeout=30, message="every failure mode visible in kubectl get pods")
    yield namespace
    sandbox_cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def test_kubectl_get_pods_shows_each_failure_status(sandbox_cluster, failing):
    rows = _ok(sandbox_cluster.kubectl("get", "pods", "-n", failing, "--no-headers")).splitlines()
    found = {row.split()[0]: row.split() for row in rows}
    for name, want in EXPECTED.items():
        assert found[name][2] in want, found[name]
        assert found[name][1] == "0/1"
    assert int(found["bad-flag"][3]) >= 1


def test_kubectl_logs_explain_the_crashes(sandbox_cluster, failing):
    assert "--max-model-len" in _ok(sandbox_cluster.kubectl("logs", "bad-flag", "-n", failing))
    assert "mooncake-master.sandbox-infra:50051" in _ok(
        sandbox_cluster.kubectl("logs", "no-master", "-n", failing)
    )
    waiting = sandbox_cluster.kubectl("logs", "unpullable", "-n", failing)
    assert waiting.returncode != 0
    assert "waiting to start" in waiting.stderr


def test_kubectl_events_name_the_causes(sandbox_cluster, failing):
    events = json.loads(_ok(sandbox_cluster.kubectl("get", "events", "-n", failing, "-o", "json")))["items"]
    by_object = {}
    for event in events:
        by_object.setdefault(event["involvedObject"]["name"], []).append((event["reason"], event["message"]))
    assert any(
        reason == "FailedMount" and 'secret "engine-credentials" not found' in message
        for reason, message in by_object["no-config"]
    )
    assert any(
        reason == "FailedScheduling"
        and message.startswith("0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
        for reason, message in by_object["wrong-accelerator"]
    )
    assert any(reason == "BackOff" for reason, _ in by_object["no-master"])
    assert any(
        reason == "Failed" and message == "Error: ErrImagePull" for reason, message in by_object["unpullable"]
    )
    described = _ok(sandbox_cluster.kubectl("describe", "pod", "bad-flag", "-n", failing))
    assert "CrashLoopBackOff" in described
    assert "Exit Code:    2" in described  # argparse refuses the value and exits 2


def test_kubectl_replace_with_a_stale_resource_version_is_a_conflict(sandbox_cluster, failing):
    _ok(sandbox_cluster.kubectl("create", "configmap", "cas", "-n", failing, "--from-literal=v=1"))
    stale = json.loads(_ok(sandbox_cluster.kubectl("get", "configmap", "cas", "-n", failing, "-o", "json")))
    _ok(sandbox_cluster.kubectl("patch", "configmap", "cas", "-n", failing, "-p", '{"data":{"v":"2"}}'))
    stale["data"] = {"v": "3"}
    result = sandbox_cluster.kubectl("replace", "-f", "-", input=json.dumps(stale))
    assert result.returncode != 0
    assert (
        "the object has been modified; please apply your changes to the latest version and try again"
        in result.stderr
    )


def test_kubectl_get_watch_streams_changes(sandbox_cluster, failing):
    watcher = subprocess.Popen(
        [
            "/usr/bin/kubectl",
            "--kubeconfig",
            str(sandbox_cluster.kubectl_kubeconfig_path),
            "get",
            "configmaps",
            "-n",
            failing,
            "-w",
            "--request-timeout=4s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    _ok(sandbox_cluster.kubectl("create", "configmap", "watched", "-n", failing))
    out, _ = watcher.communicate(timeout=20)
    assert "watched" in out
