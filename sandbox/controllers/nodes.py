"""Nodes from the command line, and the namespace lifecycle (Terminating → contents gone → removed)."""

from __future__ import annotations

from typing import Any

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.objects import Api
from sandbox.controllers.base import Reconciler, now_iso

NODE_PREFIX = "sandbox-node"


def node_object(
    index: int, accelerators: list[tuple[str, int]], labels: dict[str, str], cpu: str, memory: str, net: int
) -> dict[str, Any]:
    name = f"{NODE_PREFIX}-{index}"
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "1Ti"}
    for resource, count in accelerators:
        capacity[resource] = str(count)
    now = now_iso()
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": r,
            "message": m,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for t, r, m in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "sandbox",
                **labels,
            },
        },
        "spec": {"podCIDR": f"127.{net}.0.0/16"},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"127.{net}.0.{index}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0-tandem-sandbox",
                "kubeProxyVersion": "v1.32.0-tandem-sandbox",
                "containerRuntimeVersion": "sandbox://1.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Tandem sandbox",
                "kernelVersion": "sandbox",
                "machineID": f"sandbox-{net}-{index}",
                "systemUUID": f"sandbox-{net}-{index}",
                "bootID": f"sandbox-{net}-{index}",
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def create_nodes(
    api: Api,
    count: int,
    accelerators: list[tuple[str, int]],
    labels: dict[str, str],
    cpu: str,
    memory: str,
    net: int,
) -> None:
    rt = api.registry.by_key("", "nodes")
    for index in range(1, count + 1):
        api.create(rt, "", node_object(index, accelerators, labels, cpu, memory, net), manager="kubelet")


class NamespaceController(Reconciler):
    """Deleting a namespace deletes what it contains, then the namespace itself."""

    name = "namespace-controller"
    watches = (("", "namespaces"), ("", "pods"))

    async def reconcile(self) -> None:
        ns_rt = self.rt("", "namespaces")
        for ns in self.api.store.snapshot("", "namespaces"):
            if not ns["metadata"].get("deletionTimestamp"):
                continue
            name = ns["metadata"]["name"]
            remaining = 0
            for rt in self.api.registry.types():
                if not rt.namespaced or "delete" not in rt.verbs:
                    continue
                for obj in self.api.store.snapshot(rt.group, rt.plural, name):
                    remaining += 1
                    if obj["metadata"].get("deletionTimestamp"):
                        continue
                    try:
                        self.api.delete(rt, name, obj["metadata"]["name"])
                    except ApiError:
                        continue
            if remaining == 0 or not self.api.store.iter("", "pods", name):
                leftovers = [
                    rt
                    for rt in self.api.registry.types()
                    if rt.namespaced and self.api.store.iter(rt.group, rt.plural, name)
                ]
                if not leftovers:
                    self.api.remove_now(ns_rt, "", name)
