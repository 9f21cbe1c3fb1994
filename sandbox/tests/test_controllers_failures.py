"""Failure modes, each visible through pods, events and logs the way a real cluster shows them."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sandbox.testing import SandboxCluster


def _engine_pod(name, command, image="vllm/vllm-openai:v0.10.1", **extra):
    container = {
        "name": "vllm",
        "image": image,
        "command": command,
        "ports": [{"containerPort": 8000}],
        **extra,
    }
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


def _events(core, namespace, name):
    return core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items


def _waiting_reason(pod):
    statuses = pod.status.container_statuses or []
    return statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else None


def test_unpullable_image_is_err_image_pull_then_image_pull_back_off(sandbox_cluster, core, namespace):
    core.create_namespaced_pod(
        namespace, _engine_pod("img", ["vllm", "serve", "m"], image="vllm/vllm-openai:v0.10.1-broken")
    )
    reasons = set()

    def both_seen():
        pod = core.read_namespaced_pod("img", namespace)
        reasons.add(_waiting_reason(pod))
        return {"ErrImagePull", "ImagePullBackOff"} <= reasons

    sandbox_cluster.wait_for(both_seen, interval=0.05, message="ErrImagePull then ImagePullBackOff")
    pod = core.read_namespaced_pod("img", namespace)
    assert pod.status.phase == "Pending"
    assert not pod.status.container_statuses[0].ready
    events = {(e.reason, e.type) for e in _events(core, namespace, "img")}
    assert ("Failed", "Warning") in events
    assert ("BackOff", "Normal") in events
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log("img", namespace)
    assert "trying and failing to pull image" in exc.value.body


def test_bad_engine_argument_crash_loops_and_the_log_says_why(sandbox_cluster, core, namespace):
    command = ["vllm", "serve", "m", "--port", "8000", "--gpu-memory-utilization", "seven"]
    core.create_namespaced_pod(namespace, _engine_pod("badarg", command))

    def restarted_twice():
        statuses = core.read_namespaced_pod("badarg", namespace).status.container_statuses or []
        return (
            statuses
            and statuses[0].restart_count >= 2
            and _waiting_reason(core.read_namespaced_pod("badarg", namespace)) == "CrashLoopBackOff"
        )

    sandbox_cluster.wait_for(restarted_twice, timeout=30, message="CrashLoopBackOff with restarts")
    status = core.read_namespaced_pod("badarg", namespace).status.container_statuses[0]
    assert status.last_state.terminated.exit_code == 2  # argparse refuses the value: sys.exit(2)
    log = core.read_namespaced_pod_log("badarg", namespace)
    assert "--gpu-memory-utilization" in log and "invalid" in log
    back_off = [e for e in _events(core, namespace, "badarg") if e.reason == "BackOff"]
    assert back_off and back_off[0].message.startswith(
        "Back-off restarting failed container vllm in pod badarg_"
    )


def test_mooncake_store_without_a_master_service_crash_loops_naming_the_master(
    sandbox_cluster, core, namespace
):
    config = json.dumps({"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_both"})
    command = ["vllm", "serve", "m", "--port", "8000", "--kv-transfer-config", config]
    pod = _engine_pod("store", command, env=[{"name": "MOONCAKE_MASTER", "value": "mooncake-master:50051"}])
    core.create_namespaced_pod(namespace, pod)

    def crash_looping():
        statuses = core.read_namespaced_pod("store", namespace).status.container_statuses or []
        return (
            statuses
            and statuses[0].restart_count >= 1
            and _waiting_reason(core.read_namespaced_pod("store", namespace)) == "CrashLoopBackOff"
        )

    sandbox_cluster.wait_for(crash_looping, timeout=30, message="CrashLoopBackOff without a Mooncake master")
    log = core.read_namespaced_pod_log("store", namespace)
    assert "mooncake-master:50051" in log
    assert any(e.reason == "BackOff" and e.type == "Warning" for e in _events(core, namespace, "store"))


def test_mooncake_store_runs_once_the_master_service_exists(sandbox_cluster, core, namespace):
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "mooncake-master"},
            "spec": {"selector": {"app": "mooncake-master"}, "ports": [{"port": 50051}]},
        },
    )
    config = json.dumps({"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_both"})
    command = ["vllm", "serve", "m", "--port", "8000", "--kv-transfer-config", config]
    pod = _engine_pod(
        "store-ok", command, env=[{"name": "MOONCAKE_MASTER", "value": "mooncake-master:50051"}]
    )
    core.create_namespaced_pod(namespace, pod)

    def ready():
        statuses = core.read_namespaced_pod("store-ok", namespace).status.container_statuses or []
        return statuses and statuses[0].ready

    sandbox_cluster.wait_for(ready, timeout=30, message="the engine Ready with its master present")


def test_volume_from_a_missing_config_map_is_failed_mount_and_container_creating(
    sandbox_cluster, core, namespace
):
    pod = _engine_pod("mount", ["vllm", "serve", "m"], volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}])
    pod["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "absent-config"}}]
    core.create_namespaced_pod(namespace, pod)
    events = sandbox_cluster.wait_for(
        lambda: [e for e in _events(core, namespace, "mount") if e.reason == "FailedMount"],
        message="FailedMount",
    )
    assert events[0].type == "Warning"
    assert (
        events[0].message == 'MountVolume.SetUp failed for volume "cfg" : configmap "absent-config" not found'
    )
    pod = core.read_namespaced_pod("mount", namespace)
    assert pod.status.phase == "Pending"
    assert _waiting_reason(pod) == "ContainerCreating"
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "absent-config"}, "data": {"x": "y"}})
    sandbox_cluster.wait_for(
        lambda: core.read_namespaced_pod("mount", namespace).status.phase == "Running",
        message="the pod to start once mounted",
    )


def test_accelerator_no_node_offers_is_pending_with_failed_scheduling(sandbox_cluster, core, namespace):
    pod = _engine_pod("huge", ["vllm", "serve", "m"], resources={"limits": {"huawei.com/Ascend910": "2"}})
    core.create_namespaced_pod(namespace, pod)
    events = sandbox_cluster.wait_for(
        lambda: [e for e in _events(core, namespace, "huge") if e.reason == "FailedScheduling"],
        message="FailedScheduling",
    )
    assert events[0].type == "Warning"
    assert events[0].message.startswith("0/4 nodes are available: 4 Insufficient huawei.com/Ascend910.")
    pod = core.read_namespaced_pod("huge", namespace)
    assert pod.status.phase == "Pending"
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    assert pod.spec.node_name is None


def test_requests_beyond_free_capacity_wait_until_capacity_frees():
    # Its own small cluster, so capacity held by other tests cannot interfere.
    with SandboxCluster(nodes=2, kthena=False, accelerators=["example.com/npu=4"]) as cluster:
        core = client.CoreV1Api(cluster.api_client())
        big = {"limits": {"example.com/npu": "4"}}
        names = [f"full-{i}" for i in range(3)]
        for name in names:
            core.create_namespaced_pod("default", _engine_pod(name, ["vllm", "serve", "m"], resources=big))

        def placement():
            pods = [core.read_namespaced_pod(n, "default") for n in names]
            bound = [p for p in pods if p.spec.node_name]
            return pods if len(bound) == 2 else None

        pods = cluster.wait_for(placement, message="two pods bound, one per node")
        assert len({p.spec.node_name for p in pods if p.spec.node_name}) == 2
        waiting = next(p for p in pods if not p.spec.node_name)
        message = cluster.wait_for(
            lambda: next(
                (
                    c.message
                    for c in core.read_namespaced_pod(waiting.metadata.name, "default").status.conditions
                    or []
                    if c.type == "PodScheduled"
                ),
                None,
            ),
            message="the PodScheduled condition",
        )
        assert message.startswith("0/2 nodes are available: 2 Insufficient example.com/npu.")
        bound = next(p for p in pods if p.spec.node_name)
        core.delete_namespaced_pod(bound.metadata.name, "default")
        cluster.wait_for(
            lambda: core.read_namespaced_pod(waiting.metadata.name, "default").spec.node_name,
            message="the waiting pod bound",
        )
