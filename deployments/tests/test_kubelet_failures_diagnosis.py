"""What a kubelet reports for each failure the sandbox reproduces, diagnosed with its fix (pure: the
words are the kubelet's, the scheduler's and vLLM 0.32.0's own, as the sandbox tests pin them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from deployments.diagnosis import diagnose

CASES = Path(__file__).resolve().parents[2] / "sandbox" / "tests" / "data" / "vllm-0.32.0-argparse-cases.json"


@dataclass
class Pod:
    name: str
    phase: str = "Pending"
    ready: bool = False
    reason: str = ""
    restarts: int = 0
    message: str = ""
    labels: dict[str, str] = field(default_factory=lambda: {"tandem.io/role": "decode"})


@dataclass
class Event:
    reason: str
    message: str
    involved_name: str
    type: str = "Warning"


def _real_log(argv_tail: list[str]) -> str:
    """The usage and error vLLM 0.32.0 printed for `vllm serve /models/m <argv_tail>` (captured)."""
    doc = json.loads(CASES.read_text())
    case = next(c for c in doc["cases"] if c["argv"] == ["vllm", "serve", "/models/m", *argv_tail])
    # The top-level `vllm` parser reports leftovers with its usage; `vllm serve` the rest with its own.
    unrecognized = "unrecognized arguments" in case["stderr_tail"][-1]
    usage = doc["vllm_usage"] if unrecognized else ["usage: vllm serve [model_tag] [options]"]
    return "\n".join([*usage, *case["stderr_tail"]])


def test_unrecognized_arguments_name_each_option_and_the_extra_args_to_remove() -> None:
    pod = Pod("ds-decode-0", phase="Running", reason="CrashLoopBackOff", restarts=3)
    log = _real_log(["--bogus-flag", "--other-bogus", "2"])
    [found] = diagnose(pods=[pod], events=[], logs={pod.name: log})
    assert found["code"] == "engine_argument_rejected"
    assert found["message"] == (
        "The decode engine rejected arguments `--bogus-flag`, `--other-bogus` and exits at start "
        '(CrashLoopBackOff, 3 restarts): "vllm: error: unrecognized arguments: --bogus-flag --other-bogus 2"'
    )
    assert found["fix"].startswith("Remove `--bogus-flag`, `--other-bogus` from the decode role's extra args")


def test_an_ambiguous_option_prefix_says_what_it_could_be() -> None:
    pod = Pod("ds-decode-0", phase="Running", reason="CrashLoopBackOff", restarts=2)
    [found] = diagnose(pods=[pod], events=[], logs={pod.name: _real_log(["--max", "4096"])})
    assert found["code"] == "engine_argument_rejected"
    assert found["message"] == (
        "The decode engine rejected argument `--max` and exits at start (CrashLoopBackOff, 2 restarts): "
        "it is ambiguous, it could be `--max-log-len`, `--max-model-len`, `--max-logprobs`, "
        "`--max-parallel-loading-workers` and 11 more."
    )
    assert found["fix"] == "Write the option in full in the decode role's extra args, then deploy again."


def test_a_bad_value_is_still_a_crash_loop_quoting_vllm() -> None:
    pod = Pod("ds-decode-0", phase="Running", reason="CrashLoopBackOff", restarts=1)
    log = _real_log(["--max-model-len", "lots"])
    [found] = diagnose(pods=[pod], events=[], logs={pod.name: log})
    assert found["code"] == "crash_loop"
    assert "invalid human_readable_int_or_auto value: 'lots'" in found["message"]


def test_create_container_config_error_names_the_secret_or_configmap_and_the_namespace() -> None:
    secret = Pod("p-0", reason="CreateContainerConfigError", message='secret "hf-token" not found')
    [found] = diagnose(pods=[secret], events=[], namespace="dev")
    assert found["code"] == "secret_missing"
    assert found["message"] == (
        "The decode pods cannot start (CreateContainerConfigError): Secret `hf-token` not found in "
        "namespace `dev`."
    )
    assert "kubectl create secret generic hf-token -n dev" in found["fix"]
    key = Pod(
        "p-1", reason="CreateContainerConfigError", message="couldn't find key token in Secret dev/hf-token"
    )
    [found] = diagnose(pods=[key], events=[], namespace="dev")
    assert found["message"].endswith("Secret `hf-token` in namespace `dev` has no key `token`.")
    assert found["fix"].startswith("Add the key `token` to the Secret `hf-token`")
    # Without the pod's message, the kubelet's Failed event says the same.
    configmap = Pod("p-2", reason="CreateContainerConfigError")
    events = [Event("Failed", 'Error: configmap "engine-env" not found', "p-2")]
    [found] = diagnose(pods=[configmap], events=events, namespace="dev")
    assert found["code"] == "configmap_missing"
    assert "ConfigMap `engine-env` not found in namespace `dev`" in found["message"]


def test_a_missing_claim_and_a_missing_mounted_secret() -> None:
    pod = Pod("p-0")
    message = (
        '0/4 nodes are available: persistentvolumeclaim "model-weights" not found. '
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )
    [found] = diagnose(pods=[pod], events=[Event("FailedScheduling", message, "p-0")], namespace="dev")
    assert found["code"] == "volume_claim_missing"
    assert found["message"] == (
        "The decode pods cannot be scheduled: PersistentVolumeClaim `model-weights` not found in "
        "namespace `dev`."
    )
    assert found["fix"].startswith("Create the PersistentVolumeClaim `model-weights` in namespace `dev`")
    mount = 'MountVolume.SetUp failed for volume "certs" : secret "tls" not found'
    [found] = diagnose(pods=[pod], events=[Event("FailedMount", mount, "p-0")], namespace="dev")
    assert found["code"] == "mount_missing"
    assert found["message"] == (
        "The decode pods are stuck in ContainerCreating (FailedMount): the Secret `tls` they mount "
        "(volume `certs`) does not exist in namespace `dev`."
    )
    assert found["fix"].startswith("Create the Secret `tls` in namespace `dev`, or fix or remove the volume")
