"""Services: a cluster IP from the sandbox's loopback block, and Endpoints from the selected pods.

Cluster IPs are loopback addresses nothing listens on (there is no kube-proxy): traffic goes to
pod IPs or to a router's address (see `routers.py`).
"""

from __future__ import annotations

from typing import Any

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.objects import Api
from sandbox.controllers.base import IpPool, Reconciler, is_pod_ready


def _target_port(port: dict[str, Any], pod: dict[str, Any]) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in pod.get("spec", {}).get("containers") or []:
        for container_port in container.get("ports") or []:
            if container_port.get("name") == target:
                return int(container_port["containerPort"])
    return None


def endpoints_for(service: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `subsets` of a Service's Endpoints (pure)."""
    selector = service.get("spec", {}).get("selector") or {}
    if not selector:
        return []
    publish_not_ready = bool(service["spec"].get("publishNotReadyAddresses"))
    subsets: dict[tuple[tuple[str, int, str], ...], dict[str, list[dict[str, Any]]]] = {}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or any(labels.get(k) != v for k, v in selector.items()):
            continue
        ports = []
        for port in service["spec"].get("ports") or []:
            number = _target_port(port, pod)
            if number is not None:
                ports.append((port.get("name", ""), number, port.get("protocol", "TCP")))
        address = {
            "ip": ip,
            "nodeName": pod["spec"].get("nodeName"),
            "targetRef": {
                "kind": "Pod",
                "namespace": pod["metadata"]["namespace"],
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        }
        ready = (is_pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")) or publish_not_ready
        bucket = subsets.setdefault(tuple(ports), {"addresses": [], "notReadyAddresses": []})
        bucket["addresses" if ready else "notReadyAddresses"].append(address)
    result = []
    for ports_key, bucket in subsets.items():
        subset: dict[str, Any] = {k: v for k, v in bucket.items() if v}
        if ports_key:
            subset["ports"] = [
                {**({"name": n} if n else {}), "port": p, "protocol": proto} for n, p, proto in ports_key
            ]
        result.append(subset)
    return result


class ServiceController(Reconciler):
    """Allocates cluster IPs and keeps each selector-based Service's Endpoints current."""

    name = "endpoint-controller"
    watches = (("", "services"), ("", "pods"))

    def __init__(self, api: Api, ips: IpPool) -> None:
        super().__init__(api)
        self.ips = ips

    async def reconcile(self) -> None:
        svc_rt = self.rt("", "services")
        ep_rt = self.rt("", "endpoints")
        services = self.api.store.snapshot("", "services")
        names = {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in services}
        for endpoints in self.api.store.snapshot("", "endpoints"):
            meta = endpoints["metadata"]
            if (meta["namespace"], meta["name"]) not in names:
                self.api.remove_now(ep_rt, meta["namespace"], meta["name"])
        for service in services:
            spec = service.get("spec") or {}
            if not spec.get("clusterIP") and spec.get("type") != "ExternalName":
                service["spec"]["clusterIP"] = self.ips.allocate("service")
                service["spec"]["clusterIPs"] = [service["spec"]["clusterIP"]]
                service = self.api.write(svc_rt, service, "kube-apiserver")
            elif spec.get("clusterIP") not in (None, "None"):
                self.ips.reserve(spec["clusterIP"])
            if not spec.get("selector"):
                continue
            namespace = service["metadata"]["namespace"]
            subsets = endpoints_for(service, self.api.store.iter("", "pods", namespace))
            self._write_endpoints(ep_rt, service, subsets)

    def _write_endpoints(self, rt: Any, service: dict[str, Any], subsets: list[dict[str, Any]]) -> None:
        namespace = service["metadata"]["namespace"]
        name = service["metadata"]["name"]
        current = self.api.find(rt, namespace, name)
        try:
            if current is None:
                self.api.create(
                    rt,
                    namespace,
                    {
                        "metadata": {
                            "name": name,
                            "namespace": namespace,
                            "labels": dict(service["metadata"].get("labels") or {}),
                        },
                        "subsets": subsets,
                    },
                    manager=self.name,
                )
            elif (current.get("subsets") or []) != subsets:
                current["subsets"] = subsets
                self.api.write(rt, current, self.name)
        except ApiError:
            return
