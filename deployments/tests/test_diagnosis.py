"""Each failure mode the cluster reports turns into a plain-language diagnosis with the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from deployments.diagnosis import diagnose, last_error_line

REAL_VLLM = Path(__file__).resolve().parents[2] / "telemetry" / "tests" / "data" / "vllm-0.32.0"


@dataclass
class Pod:
    name: str
    phase: str = "Running"
    ready: bool = False
    reason: str = ""
    restarts: int = 0
    labels: dict[str, str] = field(default_factory=lambda: {"tandem.io/role": "prefill"})


@dataclass
class Event:
    reason: str
    message: str
    involved_name: str
    type: str = "Warning"


def test_failed_scheduling_with_unknown_resource_name_says_which_names_nodes_offer():
    pods = [Pod("ds-prefill-0", phase="Pending"), Pod("ds-prefill-1", phase="Pending")]
    events = [
        Event("FailedScheduling", "0/4 nodes are available: 4 Insufficient huawei.com/Ascend910.", p.name)
        for p in pods
    ]
    result = diagnose(pods=pods, events=events, node_resources={"huawei.com/ascend-1980": 32, "cpu": 64})
    assert len(result) == 1
    found = result[0]
    assert found["code"] == "resource_name_wrong"
    assert "`huawei.com/Ascend910`" in found["message"]
    assert "`huawei.com/ascend-1980` (32 free)" in found["message"]
    assert "huawei.com/ascend-1980" in found["fix"]
    assert found["pods"] == ["ds-prefill-0", "ds-prefill-1"]


def test_failed_scheduling_with_known_resource_is_insufficient_capacity():
    pods = [Pod("ds-decode-0", phase="Pending")]
    events = [
        Event(
            "FailedScheduling",
            "0/4 nodes are available: 4 Insufficient huawei.com/ascend-1980.",
            "ds-decode-0",
        )
    ]
    result = diagnose(
        pods=pods,
        events=events,
        node_resources={"huawei.com/ascend-1980": 4},
        requested={"huawei.com/ascend-1980": 40},
    )
    assert [d["code"] for d in result] == ["insufficient_capacity"]
    assert "asks for 40" in result[0]["message"] and "4 are free" in result[0]["message"]
    assert "replicas" in result[0]["fix"]


def test_image_pull_backoff_names_image_and_tag():
    pods = [
        Pod("ds-decode-0", phase="Pending", reason="ImagePullBackOff", labels={"tandem.io/role": "decode"})
    ]
    events = [
        Event(
            "Failed",
            'Failed to pull image "registry.example/vllm-ascend:v0.10-broken": not found',
            "ds-decode-0",
        ),
        Event("BackOff", 'Back-off pulling image "registry.example/vllm-ascend:v0.10-broken"', "ds-decode-0"),
    ]
    [found] = diagnose(pods=pods, events=events)
    assert found["code"] == "image_pull"
    assert "`registry.example/vllm-ascend:v0.10-broken`" in found["message"]
    assert "(tag `v0.10-broken`)" in found["message"]
    assert "decode" in found["message"]
    assert "registry" in found["fix"] and "credentials" in found["fix"]


def test_crash_loop_quotes_the_last_error_line_of_the_log():
    pods = [Pod("ds-prefill-0", reason="CrashLoopBackOff", restarts=4)]
    log = (
        "INFO 11-30 loading model\nvllm serve: error: argument --max-model-len: invalid int value: 'lots'\n\n"
    )
    [found] = diagnose(pods=pods, events=[], logs={"ds-prefill-0": log})
    assert found["code"] == "crash_loop"
    assert "4 restarts" in found["message"]
    assert "invalid int value: 'lots'" in found["message"]
    assert "extra args" in found["fix"]


def test_missing_mooncake_master_is_a_connector_backend_diagnosis():
    pods = [Pod("ds-prefill-0", reason="CrashLoopBackOff", restarts=2)]
    log = (
        "INFO start\n"
        "ERROR mooncake: cannot connect to Mooncake master at mooncake-master.dev:50051: no such host\n"
    )
    [found] = diagnose(pods=pods, events=[], logs={"ds-prefill-0": log})
    assert found["code"] == "connector_backend_missing"
    assert "`mooncake-master.dev:50051`" in found["message"]
    assert "Deploy the Mooncake master" in found["fix"]


def test_failed_mount_names_the_missing_configmap_or_secret():
    pods = [Pod("ds-prefill-0", phase="Pending", reason="ContainerCreating")]
    events = [
        Event(
            "FailedMount",
            'MountVolume.SetUp failed for volume "engine-config" : configmap "engine-config" not found',
            "ds-prefill-0",
        )
    ]
    [found] = diagnose(pods=pods, events=events)
    assert found["code"] == "mount_missing"
    assert "ConfigMap `engine-config`" in found["message"]
    secret = [Event("FailedMount", 'secret "hf-token" not found', "ds-prefill-0")]
    [found] = diagnose(pods=pods, events=secret)
    assert "Secret `hf-token`" in found["message"]


def test_ready_pods_and_other_pods_events_are_ignored():
    pods = [Pod("a", ready=True), Pod("b", ready=True)]
    events = [Event("FailedScheduling", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", "other")]
    assert diagnose(pods=pods, events=events) == []


def test_timeout_without_a_known_cause_says_not_ready_and_no_pods():
    [found] = diagnose(pods=[Pod("x", phase="Running")], events=[], timed_out=True)
    assert found["code"] == "not_ready"
    [found] = diagnose(pods=[], events=[], timed_out=True)
    assert found["code"] == "no_pods"


def test_last_error_line_prefers_error_lines_then_last_line():
    assert last_error_line("a\nValueError: bad\nshutting down\n") == "ValueError: bad"
    assert last_error_line("a\nb\n") == "b"
    assert last_error_line("") == ""


def test_a_real_vllm_refusing_its_arguments_is_quoted_by_its_exception_and_detail():
    """What vLLM 0.32 printed when --max-model-len was above the model's context (captured from the real
    engine by ``python -m realengine.capture``): the error is the pydantic exception and the line under
    it, not the link to pydantic's docs that ends the log."""
    log = (REAL_VLLM / "crash-max-model-len.log").read_text()
    line = last_error_line(log)
    assert line.startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig")
    assert (
        "Value error, User-specified max_model_len (65536) is greater than the derived max_model_len" in line
    )
    [found] = diagnose(
        pods=[Pod("d-0", reason="CrashLoopBackOff", restarts=2, labels={"tandem.io/role": "decode"})],
        events=[],
        logs={"d-0": log},
    )
    assert found["code"] == "crash_loop" and "User-specified max_model_len (65536)" in found["message"]


def test_the_same_cause_on_both_roles_is_one_finding_naming_both():
    pods = [
        Pod("p-0", reason="ImagePullBackOff", labels={"tandem.io/role": "prefill"}),
        Pod("d-0", reason="ImagePullBackOff", labels={"tandem.io/role": "decode"}),
        Pod("d-1", reason="CrashLoopBackOff", restarts=3, labels={"tandem.io/role": "decode"}),
        Pod("p-1", reason="CrashLoopBackOff", restarts=5, labels={"tandem.io/role": "prefill"}),
    ]
    events = [
        Event("Failed", 'Failed to pull image "repo/vllm:v1-broken": not found', name)
        for name in ("p-0", "d-0")
    ]
    log = "ValueError: bad {json}\n"
    found = diagnose(pods=pods, events=events, logs={"d-1": log, "p-1": log})
    assert [d["code"] for d in found] == ["image_pull", "crash_loop"]
    assert found[0]["message"].startswith("The prefill and decode image `repo/vllm:v1-broken`")
    assert found[0]["pods"] == ["d-0", "p-0"]
    assert "5 restarts" in found[1]["message"] and "bad {json}" in found[1]["message"]


def test_old_warning_events_do_not_name_the_wrong_image():
    pods = [Pod("d-0", reason="ImagePullBackOff")]
    events = [
        Event("Pulled", 'Successfully pulled image "repo/vllm:v1"', "d-0", type="Normal"),
        Event("Failed", 'Failed to pull image "repo/vllm:v2-broken": not found', "d-0"),
        Event("Pulling", 'Pulling image "repo/vllm:v2-broken"', "d-0", type="Normal"),
    ]
    [found] = diagnose(pods=pods, events=events)
    assert "`repo/vllm:v2-broken`" in found["message"]


def test_scheduling_failures_name_their_roles_once() -> None:
    from dataclasses import dataclass as _dc

    from deployments.diagnosis import diagnose

    @_dc
    class Pod:
        name: str
        labels: dict
        phase: str = "Pending"
        ready: bool = False
        reason: str = ""
        restarts: int = 0

    @_dc
    class Ev:
        involved_name: str
        message: str
        type: str = "Warning"
        reason: str = "FailedScheduling"

    pods = [
        Pod("p-0", {"tandem.io/role": "prefill"}),
        Pod("d-0", {"tandem.io/role": "decode"}),
        Pod("d-1", {"tandem.io/role": "decode"}),
    ]
    events = [
        Ev("p-0", "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."),
        Ev("d-0", "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."),
        Ev("d-1", "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."),
    ]
    found = diagnose(pods=pods, events=events)
    assert len(found) == 1
    assert found[0]["message"].startswith("The prefill and decode pods cannot be scheduled: 4 node(s)")
    assert found[0]["pods"] == ["d-0", "d-1", "p-0"]
    wrong = diagnose(
        pods=pods[:1],
        events=[Ev("p-0", "0/4 nodes are available: 4 Insufficient huawei.com/Ascend910.")],
        node_resources={"huawei.com/ascend-1980": 8},
    )
    assert wrong[0]["message"].startswith("The prefill pods cannot be scheduled: no node offers")
    assert wrong[0]["fix"].startswith("Set the prefill accelerator resource name")
