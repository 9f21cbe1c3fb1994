"""The sandbox fails like a kubelet: an engine option vLLM does not know crash-loops with vLLM's own
argparse error (exit 2), env from a missing Secret/ConfigMap (or key) is CreateContainerConfigError
until it exists, and a missing PersistentVolumeClaim keeps the pod unscheduled. Through the official
client and kubectl, on the shared sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

DATA = Path(__file__).parent / "data"
CASES = json.loads((DATA / "vllm-0.32.0-argparse-cases.json").read_text())
IMAGE = "vllm/vllm-openai:v0.10.1"


def _real_error(argv: list[str]) -> str:
    """What the real vLLM 0.32.0 printed last for this command line (captured)."""
    return next(case["stderr_tail"][-1] for case in CASES["cases"] if case["argv"] == argv)


def _engine(name: str, *args: str, **extra) -> dict:
    return {"name": name, "image": IMAGE, "command": ["vllm", "serve", *args], **extra}


def _pod(name: str, containers: list[dict], **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": containers, **spec}}


def _container(pod: client.V1Pod, name: str) -> client.V1ContainerStatus:
    return next(s for s in pod.status.container_statuses or [] if s.name == name)


def _waiting(core, namespace, name, container, reason):
    def check():
        pod = core.read_namespaced_pod(name, namespace)
        status = next((s for s in pod.status.container_statuses or [] if s.name == container), None)
        waiting = status.state.waiting if status else None
        return pod if waiting is not None and waiting.reason == reason else None

    return check


def _events(core, namespace, name) -> list[tuple[str, str, str]]:
    items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.type, e.reason, e.message) for e in items]


@pytest.fixture(scope="module")
def kubelet_ns(sandbox_cluster):
    """Every failing pod at once (they fail in parallel), in one namespace for the module."""
    import uuid

    core = client.CoreV1Api(sandbox_cluster.api_client())
    namespace = f"kubelet-failures-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    secret_env = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
    pods = [
        _pod("unknown-flag", [_engine("vllm", "/models/m", "--bogus-flag")]),
        _pod(
            "missing-secret",
            [_engine("vllm", "/models/m", env=[secret_env]), {"name": "runtime", "image": "busybox:1.36"}],
        ),
        _pod(
            "missing-configmap",
            [_engine("vllm", "/models/m", envFrom=[{"configMapRef": {"name": "engine-env"}}])],
        ),
        _pod(
            "optional-refs",
            [
                _engine(
                    "vllm",
                    "/models/m",
                    env=[
                        {
                            "name": "OPT",
                            "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": True}},
                        }
                    ],
                    envFrom=[{"configMapRef": {"name": "absent", "optional": True}}],
                )
            ],
        ),
        _pod(
            "init-secret",
            [_engine("vllm", "/models/m")],
            initContainers=[
                {
                    "name": "downloader",
                    "image": "busybox:1.36",
                    "command": ["true"],
                    "envFrom": [{"secretRef": {"name": "downloader-token"}}],
                }
            ],
        ),
        _pod(
            "missing-claim",
            [_engine("vllm", "/models/m", volumeMounts=[{"name": "weights", "mountPath": "/models"}])],
            volumes=[{"name": "weights", "persistentVolumeClaim": {"claimName": "model-weights"}}],
        ),
    ]
    for pod in pods:
        core.create_namespaced_pod(namespace, pod)
    yield namespace
    core.delete_namespace(namespace)


def test_an_unknown_engine_flag_crash_loops_with_vllms_own_argparse_error(sandbox_cluster, kubelet_ns):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    pod = sandbox_cluster.wait_for(
        _waiting(core, kubelet_ns, "unknown-flag", "vllm", "CrashLoopBackOff"),
        timeout=20,
        message="the engine with an unknown flag crash-looping",
    )
    status = _container(pod, "vllm")
    assert status.restart_count >= 1 and not status.ready
    terminated = status.last_state.terminated
    real = _real_error(["vllm", "serve", "/models/m", "--bogus-flag"])
    assert real == "vllm: error: unrecognized arguments: --bogus-flag"
    assert terminated.exit_code == 2 and terminated.message == real  # argparse exits 2
    log = sandbox_cluster.kubectl("logs", "unknown-flag", "-n", kubelet_ns)
    assert log.returncode == 0, log.stderr
    assert log.stdout.splitlines()[0] == "usage: vllm [-h] [-v]"
    assert log.stdout.splitlines()[-1] == real
    described = sandbox_cluster.kubectl("describe", "pod", "unknown-flag", "-n", kubelet_ns).stdout
    assert "Exit Code:    2" in described


def test_env_from_a_missing_secret_waits_in_create_container_config_error_until_it_exists(
    sandbox_cluster, kubelet_ns
):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    pod = sandbox_cluster.wait_for(
        _waiting(core, kubelet_ns, "missing-secret", "vllm", "CreateContainerConfigError"),
        timeout=20,
        message="CreateContainerConfigError for the missing Secret",
    )
    assert _container(pod, "vllm").state.waiting.message == 'secret "hf-token" not found'
    assert _container(pod, "runtime").state.running is not None  # the other container runs
    assert pod.status.phase == "Pending"  # a container that never started keeps the pod Pending
    assert ("Warning", "Failed", 'Error: secret "hf-token" not found') in _events(
        core, kubelet_ns, "missing-secret"
    )
    row = sandbox_cluster.kubectl("get", "pod", "missing-secret", "-n", kubelet_ns, "--no-headers").stdout
    assert row.split()[1:3] == ["1/2", "CreateContainerConfigError"]

    core.create_namespaced_secret(
        kubelet_ns, {"metadata": {"name": "hf-token"}, "stringData": {"other": "x"}}
    )
    key_missing = f"couldn't find key token in Secret {kubelet_ns}/hf-token"
    sandbox_cluster.wait_for(
        lambda: (
            _container(core.read_namespaced_pod("missing-secret", kubelet_ns), "vllm").state.waiting.message
            == key_missing
        ),
        timeout=20,
        message="the missing key named once the Secret exists",
    )
    core.patch_namespaced_secret("hf-token", kubelet_ns, {"stringData": {"token": "hf_x"}})
    pod = sandbox_cluster.wait_for(
        lambda: (p := core.read_namespaced_pod("missing-secret", kubelet_ns)).status.phase == "Running" and p,
        timeout=20,
        message="the engine starting once the key exists, with no new pod",
    )
    assert _container(pod, "vllm").state.running is not None


def test_env_from_a_missing_configmap_and_an_init_container_missing_a_secret(sandbox_cluster, kubelet_ns):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    pod = sandbox_cluster.wait_for(
        _waiting(core, kubelet_ns, "missing-configmap", "vllm", "CreateContainerConfigError"),
        timeout=20,
        message="CreateContainerConfigError for the missing ConfigMap",
    )
    assert _container(pod, "vllm").state.waiting.message == 'configmap "engine-env" not found'

    def init_blocked():
        row = sandbox_cluster.kubectl("get", "pod", "init-secret", "-n", kubelet_ns, "--no-headers").stdout
        return row.split()[2] == "Init:CreateContainerConfigError" if row else False

    sandbox_cluster.wait_for(init_blocked, timeout=20, message="Init:CreateContainerConfigError")
    pod = core.read_namespaced_pod("init-secret", kubelet_ns)
    waiting = pod.status.init_container_statuses[0].state.waiting
    assert (waiting.reason, waiting.message) == (
        "CreateContainerConfigError",
        'secret "downloader-token" not found',
    )
    assert _container(pod, "vllm").state.waiting.reason == "PodInitializing"
    assert pod.status.phase == "Pending"


def test_optional_references_to_missing_objects_start(sandbox_cluster, kubelet_ns):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    sandbox_cluster.wait_for(
        lambda: core.read_namespaced_pod("optional-refs", kubelet_ns).status.phase == "Running",
        timeout=20,
        message="a pod whose missing references are all optional running",
    )


def test_a_missing_persistent_volume_claim_keeps_the_pod_unscheduled_until_created(
    sandbox_cluster, kubelet_ns
):
    core = client.CoreV1Api(sandbox_cluster.api_client())
    message = (
        '0/4 nodes are available: persistentvolumeclaim "model-weights" not found. '
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    sandbox_cluster.wait_for(
        lambda: ("Warning", "FailedScheduling", message) in _events(core, kubelet_ns, "missing-claim"),
        timeout=20,
        message="FailedScheduling naming the missing claim",
    )
    pod = core.read_namespaced_pod("missing-claim", kubelet_ns)
    assert pod.status.phase == "Pending" and not pod.spec.node_name
    claim = {
        "metadata": {"name": "model-weights"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    core.create_namespaced_persistent_volume_claim(kubelet_ns, claim)
    sandbox_cluster.wait_for(
        lambda: core.read_namespaced_pod("missing-claim", kubelet_ns).spec.node_name,
        timeout=20,
        message="the pod scheduled once its claim exists",
    )
