"""`kubectl logs` on a pod with an init container behaves like a real cluster: `-c <init>` and
`--all-containers` read the init container too; an unknown name is refused, naming both lists."""

from __future__ import annotations

import time
import uuid

import pytest

POD = """
apiVersion: v1
kind: Pod
metadata: {name: with-init}
spec:
  initContainers:
  - {name: downloader, image: ghcr.io/volcano-sh/downloader:latest, args: [--source, Qwen/Qwen3-0.6B]}
  containers:
  - {name: sidecar, image: busybox:1.36}
  - {name: helper, image: busybox:1.36}
"""


@pytest.fixture
def namespace(sandbox_cluster):
    name = f"logs{uuid.uuid4().hex[:6]}"
    assert sandbox_cluster.kubectl("create", "namespace", name).returncode == 0
    assert sandbox_cluster.kubectl("apply", "-n", name, "-f", "-", input=POD).returncode == 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        phase = sandbox_cluster.kubectl(
            "get", "pod", "with-init", "-n", name, "-o", "jsonpath={.status.phase}"
        )
        if phase.stdout == "Running":
            break
        time.sleep(0.2)
    yield name
    sandbox_cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_all_containers_includes_the_init_container(sandbox_cluster, namespace):
    result = sandbox_cluster.kubectl("logs", "with-init", "-n", namespace, "--all-containers")
    assert result.returncode == 0, result.stderr
    assert "init container downloader completed" in result.stdout
    assert "container sidecar started" in result.stdout and "container helper started" in result.stdout
    init = sandbox_cluster.kubectl("logs", "with-init", "-n", namespace, "-c", "downloader")
    assert init.returncode == 0 and "init container downloader started" in init.stdout


def test_a_wrong_or_missing_container_name_is_refused_with_the_choices(sandbox_cluster, namespace):
    wrong = sandbox_cluster.kubectl("logs", "with-init", "-n", namespace, "-c", "nope")
    assert wrong.returncode != 0 and "container nope is not valid for pod with-init" in wrong.stderr
    missing = sandbox_cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/pods/with-init/log")
    assert missing.returncode != 0
    assert "choose one of: [sidecar helper] or one of the init containers: [downloader]" in missing.stderr
