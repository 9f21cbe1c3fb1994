from __future__ import annotations

from kube.cluster_info import accelerator_requests_by_node, is_accelerator_resource, node_info
from kube.resources import apply_order
from kube.workloads import event_info, pod_info


def test_crashlooping_pod_reports_reason_restarts_and_ports():
    pod = {
        "metadata": {
            "name": "ds-prefill-0",
            "namespace": "llm",
            "labels": {"tandem.io/role": "prefill"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "e", "ports": [{"containerPort": 8000}]}]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.5",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {
                    "restartCount": 4,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": "back-off 40s restarting failed container",
                        }
                    },
                }
            ],
        },
    }
    info = pod_info(pod)
    assert (info.name, info.node, info.ip, info.ready) == ("ds-prefill-0", "n1", "127.0.0.5", False)
    assert info.reason == "CrashLoopBackOff"
    assert info.restarts == 4
    assert info.container_ports == (8000,)
    assert info.labels["tandem.io/role"] == "prefill"
    assert info.created is not None and info.created.year == 2026


def test_unschedulable_pod_reports_the_scheduler_message():
    pod = {
        "metadata": {"name": "p"},
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/4 nodes are available: 4 Insufficient huawei.com/ascend-1980.",
                }
            ],
        },
    }
    info = pod_info(pod)
    assert info.reason == "Unschedulable"
    assert "Insufficient huawei.com/ascend-1980" in info.message


def test_ready_pod_has_no_reason_and_terminating_pod_is_flagged():
    pod = {
        "metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"restartCount": 0, "state": {"running": {}}}],
        },
    }
    info = pod_info(pod)
    assert info.ready and info.reason == "" and info.deletion_pending


def test_accelerator_resources_are_vendor_extended_resources():
    assert is_accelerator_resource("nvidia.com/gpu")
    assert is_accelerator_resource("huawei.com/Ascend910")
    assert not is_accelerator_resource("cpu")
    assert not is_accelerator_resource("hugepages-2Mi")
    assert not is_accelerator_resource("kubernetes.io/batch-cpu")
    assert not is_accelerator_resource("scheduling.k8s.io/foo")


def test_in_use_counts_non_terminated_pods_on_each_node():
    def pod(node, phase, count, init=0):
        spec = {
            "nodeName": node,
            "containers": [{"resources": {"limits": {"huawei.com/ascend-1980": count}}}],
        }
        if init:
            spec["initContainers"] = [{"resources": {"requests": {"huawei.com/ascend-1980": init}}}]
        return {"spec": spec, "status": {"phase": phase}}

    pods = [
        pod("n1", "Running", 2),
        pod("n1", "Pending", 4),
        pod("n1", "Succeeded", 8),
        pod("n2", "Failed", 8),
        pod("n2", "Running", 1, init=3),
    ]
    assert accelerator_requests_by_node(pods) == {
        "n1": {"huawei.com/ascend-1980": 6},
        "n2": {"huawei.com/ascend-1980": 3},
    }


def test_node_info_reads_capacity_allocatable_and_readiness():
    node = {
        "metadata": {"name": "n1", "labels": {"accelerator": "ascend"}},
        "status": {
            "capacity": {"cpu": "64", "huawei.com/ascend-1980": "8"},
            "allocatable": {"cpu": "63", "huawei.com/ascend-1980": "7"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    info = node_info(node, {"huawei.com/ascend-1980": 3})
    assert info.ready and info.accelerators == ["huawei.com/ascend-1980"]
    assert info.capacity == {"huawei.com/ascend-1980": 8}
    assert info.allocatable == {"huawei.com/ascend-1980": 7}
    assert info.in_use == {"huawei.com/ascend-1980": 3}


def test_apply_order_puts_namespaces_first_and_routes_last():
    objs = [
        {"kind": k}
        for k in ("ModelRoute", "ModelServing", "Service", "Namespace", "ModelServer", "ConfigMap")
    ]
    assert [o["kind"] for o in apply_order(objs)] == [
        "Namespace",
        "ConfigMap",
        "Service",
        "ModelServing",
        "ModelServer",
        "ModelRoute",
    ]


def test_event_info_reads_core_events():
    event = {
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": "0/4 nodes",
        "count": 3,
        "involvedObject": {"kind": "Pod", "name": "p"},
        "lastTimestamp": "2026-01-01T00:00:05Z",
        "metadata": {"namespace": "llm"},
    }
    info = event_info(event)
    assert (info.type, info.reason, info.involved_kind, info.involved_name, info.count) == (
        "Warning",
        "FailedScheduling",
        "Pod",
        "p",
        3,
    )
    assert info.last_time is not None


def test_the_serving_container_is_named_only_when_a_pod_has_several():
    def pod(containers):
        return {"metadata": {"name": "p"}, "spec": {"containers": containers}, "status": {"phase": "Running"}}

    assert pod_info(pod([{"name": "engine", "ports": [{"containerPort": 8000}]}])).serving_container is None
    sidecar_first = [{"name": "runtime"}, {"name": "engine", "ports": [{"containerPort": 8000}]}]
    assert pod_info(pod(sidecar_first)).serving_container == "engine"  # pods/log needs the name then
    assert pod_info(pod([{"name": "a"}, {"name": "b"}])).serving_container == "a"
