"""kubectl, unmodified, against the sandbox: the Kthena P/D example applied with server-side apply."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import requests
import yaml

EXAMPLE = Path(__file__).parent / "data" / "model-serving__prefill-decode-disaggregation.yaml"


def _ok(result):
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def deployed(sandbox_cluster, tmp_path_factory):
    """The example ModelServing, unchanged except for its namespace (each test module gets its own)."""
    namespace = f"kt-{uuid.uuid4().hex[:8]}"
    manifest = yaml.safe_load(EXAMPLE.read_text())
    manifest["metadata"]["namespace"] = namespace
    path = tmp_path_factory.mktemp("kthena") / "modelserving.yaml"
    path.write_text(yaml.safe_dump(manifest))
    _ok(
        sandbox_cluster.kubectl(
            "apply", "-f", "-", input=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"
        )
    )
    out = _ok(sandbox_cluster.kubectl("apply", "--server-side", "-f", str(path)))
    assert "modelserving.workload.serving.volcano.sh/deepseek-v2-lite serverside-applied" in out

    def ready_pods():
        pods = json.loads(_ok(sandbox_cluster.kubectl("get", "pods", "-n", namespace, "-o", "json")))["items"]
        ready = [
            p
            for p in pods
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        ]
        return pods if len(pods) == 2 and len(ready) == 2 else None

    sandbox_cluster.wait_for(ready_pods, timeout=60, message="prefill and decode pods Ready")
    yield namespace, path
    sandbox_cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def test_role_label_selector_lists_only_decode_pods(sandbox_cluster, deployed):
    namespace, _ = deployed
    out = _ok(
        sandbox_cluster.kubectl(
            "get", "pods", "-n", namespace, "-l", "modelserving.volcano.sh/role=decode", "-o", "name"
        )
    )
    assert out.split() == ["pod/deepseek-v2-lite-0-decode-0-0"]
    prefill = _ok(
        sandbox_cluster.kubectl(
            "get", "pods", "-n", namespace, "-l", "modelserving.volcano.sh/role=prefill", "-o", "name"
        )
    )
    assert prefill.split() == ["pod/deepseek-v2-lite-0-prefill-0-0"]


def test_pods_carry_kthena_labels_and_their_engines_serve_metrics(sandbox_cluster, deployed):
    namespace, _ = deployed
    pods = json.loads(_ok(sandbox_cluster.kubectl("get", "pods", "-n", namespace, "-o", "json")))["items"]
    for pod in pods:
        labels = pod["metadata"]["labels"]
        role = labels["modelserving.volcano.sh/role"]
        assert labels["modelserving.volcano.sh/name"] == "deepseek-v2-lite"
        assert labels["modelserving.volcano.sh/group-name"] == "deepseek-v2-lite-0"
        assert labels["modelserving.volcano.sh/role-id"] == f"{role}-0"
        assert labels["modelserving.volcano.sh/entry"] == "true"
        ip = pod["status"]["podIP"]
        assert ip.startswith("127.") and ip != "127.0.0.1"
        metrics = requests.get(f"http://{ip}:8000/metrics", timeout=5).text
        assert 'vllm:num_requests_running{model_name="deepseek-ai/DeepSeekV2"' in metrics
    ips = {p["status"]["podIP"] for p in pods}
    assert len(ips) == 2


def test_kubectl_get_pods_shows_ready_and_running(sandbox_cluster, deployed):
    namespace, _ = deployed
    out = _ok(sandbox_cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide"))
    header, *rows = out.strip().splitlines()
    assert header.split()[:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "NODE" in header
    for row in rows:
        assert row.split()[1:3] == ["2/2", "Running"]


def test_kubectl_logs_describe_and_events(sandbox_cluster, deployed):
    namespace, _ = deployed
    logs = _ok(
        sandbox_cluster.kubectl("logs", "-n", namespace, "deepseek-v2-lite-0-decode-0-0", "-c", "vllm")
    )
    assert "MooncakeConnectorV1" in logs
    described = _ok(
        sandbox_cluster.kubectl("describe", "pod", "-n", namespace, "deepseek-v2-lite-0-prefill-0-0")
    )
    assert "modelserving.volcano.sh/role=prefill" in described
    assert "Successfully assigned" in described
    assert "Started container vllm" in described
    events = _ok(sandbox_cluster.kubectl("get", "events", "-n", namespace))
    assert "Scheduled" in events and "Started" in events


def test_kubectl_scale_modelserving_changes_serving_groups(sandbox_cluster, deployed):
    namespace, _ = deployed
    out = _ok(
        sandbox_cluster.kubectl("scale", "-n", namespace, "modelserving/deepseek-v2-lite", "--replicas=2")
    )
    assert "scaled" in out

    def group_one():
        names = _ok(
            sandbox_cluster.kubectl(
                "get",
                "pods",
                "-n",
                namespace,
                "-l",
                "modelserving.volcano.sh/group-name=deepseek-v2-lite-1",
                "-o",
                "name",
            )
        ).split()
        return sorted(names) if len(names) == 2 else None

    assert sandbox_cluster.wait_for(group_one, message="a second serving group") == [
        "pod/deepseek-v2-lite-1-decode-0-0",
        "pod/deepseek-v2-lite-1-prefill-0-0",
    ]
    ms = json.loads(
        _ok(sandbox_cluster.kubectl("get", "modelserving", "-n", namespace, "deepseek-v2-lite", "-o", "json"))
    )
    assert ms["spec"]["replicas"] == 2
    _ok(sandbox_cluster.kubectl("scale", "-n", namespace, "modelserving/deepseek-v2-lite", "--replicas=1"))

    def gone():
        names = _ok(sandbox_cluster.kubectl("get", "pods", "-n", namespace, "-o", "name")).split()
        return len(names) == 2

    sandbox_cluster.wait_for(gone, message="the second group drained")


def test_server_side_apply_reports_conflict_with_kubectl_scale_and_force_wins(sandbox_cluster, deployed):
    namespace, path = deployed
    _ok(sandbox_cluster.kubectl("scale", "-n", namespace, "modelserving/deepseek-v2-lite", "--replicas=1"))
    manifest = yaml.safe_load(path.read_text())
    manifest["spec"]["replicas"] = 3
    changed = path.with_name("changed.yaml")
    changed.write_text(yaml.safe_dump(manifest))
    conflict = sandbox_cluster.kubectl("apply", "--server-side", "-f", str(changed))
    assert conflict.returncode != 0
    assert 'conflict with "kubectl"' in conflict.stderr
    assert ".spec.replicas" in conflict.stderr
    manifest["spec"]["replicas"] = 1
    changed.write_text(yaml.safe_dump(manifest))
    _ok(sandbox_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(changed)))


def test_kubectl_sees_kthena_resources_and_crds(sandbox_cluster, deployed):
    namespace, _ = deployed
    resources = _ok(sandbox_cluster.kubectl("api-resources", "--api-group=workload.serving.volcano.sh"))
    assert "modelservings" in resources and "autoscalingpolicies" in resources
    crds = _ok(sandbox_cluster.kubectl("get", "crd"))
    assert "modelservings.workload.serving.volcano.sh" in crds
    table = _ok(sandbox_cluster.kubectl("get", "modelservings", "-n", namespace))
    assert table.split()[:5] == ["NAME", "REPLICAS", "AVAILABLE", "UPDATED", "AGE"]


def test_kubectl_refuses_an_invalid_modelserving_with_the_field_path(sandbox_cluster, deployed, tmp_path):
    _, path = deployed
    manifest = yaml.safe_load(path.read_text())
    manifest["metadata"]["name"] = "broken-spec"
    manifest["spec"]["template"]["roles"][0]["replicas"] = "one"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(manifest))
    result = sandbox_cluster.kubectl("apply", "--server-side", "-f", str(bad))
    assert result.returncode != 0
    assert "spec.template.roles[0].replicas" in result.stderr


def test_host_network_example_with_scripts_from_a_config_map_serves_through_its_route():
    """Kthena's DeepSeek-V4 example: hostNetwork pods, `./prefill.sh` from a ConfigMap, 16 NPUs each."""
    from sandbox.testing import SandboxCluster

    data = Path(__file__).parent / "data"
    with SandboxCluster(
        nodes=2,
        kthena=True,
        accelerators=["huawei.com/ascend-1980=16"],
        extra_args=["--node-cpu", "256", "--node-memory", "2Ti"],
    ) as cluster:
        _ok(
            cluster.kubectl(
                "apply", "--server-side", "-f", str(data / "models__deepseek-v4-flash__modelserving.yaml")
            )
        )
        _ok(
            cluster.kubectl(
                "apply", "--server-side", "-f", str(data / "models__deepseek-v4-flash__router.yaml")
            )
        )
        _ok(
            cluster.kubectl(
                "wait",
                "--for=condition=Ready",
                "pod",
                "-l",
                "modelserving.volcano.sh/name=deepseekv4-pd",
                "--timeout=60s",
            )
        )
        pods = json.loads(_ok(cluster.kubectl("get", "pods", "-o", "json")))["items"]
        assert sorted(p["metadata"]["labels"]["modelserving.volcano.sh/role"] for p in pods) == [
            "decode",
            "prefill",
        ]
        for pod in pods:
            assert pod["status"]["podIP"] == pod["status"]["hostIP"]
        prefill_log = _ok(cluster.kubectl("logs", "deepseekv4-pd-0-prefill-0-0"))
        assert "--served-model-name deepseek_v4" in prefill_log
        url = cluster.wait_for(
            lambda: (
                json.loads(_ok(cluster.kubectl("get", "modelroute", "deepseek-v4", "-o", "json")))["metadata"]
                .get("annotations", {})
                .get("sandbox.tandem.io/router-url")
            )
        )
        response = requests.post(
            f"{url}/v1/completions",
            json={"model": "deepseek_v4", "prompt": "hi", "max_tokens": 3},
            timeout=30,
        )
        assert response.status_code == 200, response.text
