"""P/D routers (`sandbox.router.farm.RouterFarm`) for Kthena ModelRoutes and for router Services.

* A ModelRoute gets a router on its own loopback address, port 8080, serving `spec.modelName`
  over the pods of every ModelServer its rules target: pods matching the server's
  `workloadSelector.matchLabels`, role from `pdGroup.prefillLabels` / `decodeLabels`, paired by
  the `pdGroup.groupKey` label, port `workloadPort.port`; timeout and retries from the first
  server's `trafficPolicy`. The URL is written to the annotation `sandbox.tandem.io/router-url`
  of the ModelRoute and of each targeted ModelServer.
* A Service labelled `tandem.io/role=router` (the plain-Deployments backend) gets a router on its
  own loopback address at the Service's first port: prefill and decode pods are those selected by
  the Services named in its `tandem.io/prefill-service` / `tandem.io/decode-service` annotations
  (all in one pairing group), the model is `tandem.io/model`, and `tandem.io/timeout-seconds`,
  `tandem.io/retry-attempts`, `tandem.io/retry-interval-ms` set the policy. The Service's
  `status.loadBalancer.ingress[0].ip` and its `sandbox.tandem.io/router-url` annotation say where.
* Either may carry `sandbox.tandem.io/router-policy: round-robin`: the router then ignores prefixes
  (no affinity, no `kthena_router_prefix_cache_match_ratio` observations); `prefix-aware` (the default)
  routes a known prefix to the pod that served it.
* With Kthena installed, the ModelRoute routers stand for the replicas of Kthena's one router: like
  Kthena's chart (`charts/kthena/charts/networking/templates/kthena-router/component/service.yaml`),
  a Service `kthena-system/kthena-router-metrics` with a port named `metrics` is where their
  `/metrics` are found, its Endpoints listing every running ModelRoute router (selector-less: the
  routers are not pods here).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.apiserver.objects import Api
from sandbox.controllers.base import IpPool, Reconciler, is_pod_ready
from sandbox.controllers.loadbalancer import Forwarders
from sandbox.router.farm import Endpoint, RouterFarm, RouterSpec

URL_ANNOTATION = "sandbox.tandem.io/router-url"
POLICY_ANNOTATION = "sandbox.tandem.io/router-policy"


def prefix_aware(obj: dict[str, Any]) -> bool:
    """The router's policy from its object's annotation: only `round-robin` ignores prefixes."""
    return (obj["metadata"].get("annotations") or {}).get(POLICY_ANNOTATION) != "round-robin"


ROUTE_PORT = 8080
METRICS_NAMESPACE = "kthena-system"
METRICS_SERVICE = "kthena-router-metrics"
NET = "networking.serving.volcano.sh"
DEFAULT_TIMEOUT = 60.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s|us|µs|ns)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: Any, default: float) -> float:
    """Go duration strings as in `trafficPolicy` ("10s", "150ms", "1m30s")."""
    if text in (None, ""):
        return default
    parts = _DURATION.findall(str(text))
    if not parts:
        return default
    return sum(float(value) * _UNIT[unit] for value, unit in parts)


def _matches(labels: dict[str, str], wanted: dict[str, str] | None) -> bool:
    return bool(wanted) and all(labels.get(k) == v for k, v in (wanted or {}).items())


def server_endpoints(server: dict[str, Any], pods: list[dict[str, Any]]) -> list[Endpoint]:
    """Endpoints of one ModelServer (pure)."""
    spec = server.get("spec") or {}
    selector = spec.get("workloadSelector") or {}
    match = selector.get("matchLabels") or {}
    pd = selector.get("pdGroup") or {}
    port = int((spec.get("workloadPort") or {}).get("port") or 8000)
    result = []
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or any(labels.get(k) != v for k, v in match.items()):
            continue
        if pd:
            if _matches(labels, pd.get("prefillLabels")):
                role = "prefill"
            elif _matches(labels, pd.get("decodeLabels")):
                role = "decode"
            else:
                continue
            group = labels.get(pd.get("groupKey", ""), "")
        else:
            role, group = "both", ""
        ready = is_pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")
        result.append(Endpoint(pod["metadata"]["name"], ip, port, role, group, ready))
    return result


def service_endpoints(
    router: dict[str, Any], services: dict[str, dict[str, Any]], pods: list[dict[str, Any]]
) -> list[Endpoint]:
    """Endpoints for a router Service of the plain backend (pure)."""
    annotations = router["metadata"].get("annotations") or {}
    result = []
    for role, key in (("prefill", "tandem.io/prefill-service"), ("decode", "tandem.io/decode-service")):
        service = services.get(annotations.get(key) or "")
        if service is None:
            continue
        selector = service.get("spec", {}).get("selector") or {}
        ports = service.get("spec", {}).get("ports") or [{}]
        port = ports[0].get("targetPort", ports[0].get("port", 8000))
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            ip = (pod.get("status") or {}).get("podIP")
            if not selector or not ip or any(labels.get(k) != v for k, v in selector.items()):
                continue
            ready = is_pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")
            result.append(Endpoint(pod["metadata"]["name"], ip, int(port), role, "", ready))
    return result


def _fixed(ip: str, port: int) -> Callable[[], tuple[str, int] | None]:
    def target() -> tuple[str, int] | None:
        return ip, port

    return target


@dataclass
class _Running:
    ip: str
    port: int
    spec: RouterSpec
    external: str = ""  # the host-reachable address (isolated pod network: a forwarder's)


class RouterController(Reconciler):
    name = "router-controller"
    watches = ((NET, "modelroutes"), (NET, "modelservers"), ("", "services"))

    def __init__(self, api: Api, ips: IpPool, farm: RouterFarm, forwarders: Forwarders | None = None) -> None:
        super().__init__(api)
        self.ips = ips
        self.farm = farm
        self.forwarders = forwarders
        self.running: dict[str, _Running] = {}

    @property
    def _isolated(self) -> bool:
        return self.forwarders is not None and self.forwarders.network.isolated

    def _has_kthena(self) -> bool:
        return (NET, "modelroutes") in {rt.key for rt in self.api.registry.types()}

    async def reconcile(self) -> None:
        wanted: dict[str, tuple[RouterSpec, int, Callable[[], list[Endpoint]], Callable[[str], None]]] = {}
        if self._has_kthena():
            for route in self.api.store.snapshot(NET, "modelroutes"):
                self._want_route(route, wanted)
        for service in self.api.store.snapshot("", "services"):
            if (service["metadata"].get("labels") or {}).get("tandem.io/role") == "router":
                self._want_service(service, wanted)
        for key in [k for k in self.running if k not in wanted]:
            await self.farm.stop(key)
            gone = self.running.pop(key)
            self.ips.release(gone.ip)
            if gone.external and self.forwarders is not None:
                await self.forwarders.close(gone.external)
                self.ips.release(gone.external)
        for key, (spec, port, endpoints, publish) in wanted.items():
            current = self.running.get(key)
            if current is None or current.spec != spec or current.port != port:
                ip = current.ip if current else self.ips.allocate("router")
                await self.farm.start(key, ip, port, spec, endpoints)
                external = current.external if current else ""
                if self._isolated and self.forwarders is not None:
                    external = external or self.ips.allocate("external")
                    await self.forwarders.close(external)
                    await self.forwarders.open(external, port, _fixed(ip, port))
                self.running[key] = _Running(ip, port, spec, external)
            publish(self.running[key].external or self.running[key].ip)
        if self._has_kthena():
            self._publish_metrics(
                [r.ip for k, r in sorted(self.running.items()) if k.startswith("modelroute/")]
            )

    async def close(self) -> None:
        if self.forwarders is not None:
            await self.forwarders.close_all()
        await self.farm.close()

    def _want_route(self, route: dict[str, Any], wanted: dict[str, Any]) -> None:
        namespace = route["metadata"]["namespace"]
        server_rt = self.rt(NET, "modelservers")
        names = [
            target.get("modelServerName")
            for rule in (route.get("spec") or {}).get("rules") or []
            for target in rule.get("targetModels") or []
            if target.get("modelServerName")
        ]
        servers = [
            s for s in (self.api.find(server_rt, namespace, n) for n in dict.fromkeys(names)) if s is not None
        ]
        policy = ((servers[0].get("spec") or {}).get("trafficPolicy") or {}) if servers else {}
        retry = policy.get("retry") or {}
        spec = RouterSpec(
            model_name=str((route.get("spec") or {}).get("modelName") or route["metadata"]["name"]),
            timeout_seconds=parse_duration(policy.get("timeout"), DEFAULT_TIMEOUT),
            retry_attempts=int(retry.get("attempts") or 0),
            retry_interval_seconds=parse_duration(retry.get("retryInterval"), 0.1),
            prefix_aware=prefix_aware(route),
        )
        server_names = [s["metadata"]["name"] for s in servers]

        def endpoints() -> list[Endpoint]:
            pods = self.api.store.iter("", "pods", namespace)
            found: list[Endpoint] = []
            for name in server_names:
                server = self.api.store.peek(NET, "modelservers", namespace, name)
                if server is not None:
                    found += server_endpoints(server, pods)
            return found

        def publish(ip: str) -> None:
            url = f"http://{ip}:{ROUTE_PORT}"
            self._annotate(self.rt(NET, "modelroutes"), route, url)
            for server in servers:
                self._annotate(server_rt, server, url)

        wanted[f"modelroute/{namespace}/{route['metadata']['name']}"] = (spec, ROUTE_PORT, endpoints, publish)

    def _want_service(self, service: dict[str, Any], wanted: dict[str, Any]) -> None:
        namespace = service["metadata"]["namespace"]
        annotations = service["metadata"].get("annotations") or {}
        ports = service.get("spec", {}).get("ports") or [{"port": 8000}]
        spec = RouterSpec(
            model_name=str(annotations.get("tandem.io/model") or service["metadata"]["name"]),
            timeout_seconds=float(annotations.get("tandem.io/timeout-seconds") or DEFAULT_TIMEOUT),
            retry_attempts=int(annotations.get("tandem.io/retry-attempts") or 0),
            retry_interval_seconds=float(annotations.get("tandem.io/retry-interval-ms") or 100) / 1000,
            prefix_aware=prefix_aware(service),
        )
        name = service["metadata"]["name"]

        def endpoints() -> list[Endpoint]:
            current = self.api.store.peek("", "services", namespace, name)
            if current is None:
                return []
            services = {s["metadata"]["name"]: s for s in self.api.store.iter("", "services", namespace)}
            return service_endpoints(current, services, self.api.store.iter("", "pods", namespace))

        def publish(ip: str) -> None:
            svc_rt = self.rt("", "services")
            current = self.api.find(svc_rt, namespace, name)
            if current is None:
                return
            self._annotate(svc_rt, current, f"http://{ip}:{int(ports[0].get('port', 8000))}")
            current = self.api.find(svc_rt, namespace, name)
            # Only a LoadBalancer Service gets an external address, as on a real cluster.
            if current is not None and (current.get("spec") or {}).get("type") == "LoadBalancer":
                status = {
                    **(current.get("status") or {}),
                    "loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]},
                }
                self.api.write_status(svc_rt, current, status, self.name)

        wanted[f"service/{namespace}/{name}"] = (spec, int(ports[0].get("port", 8000)), endpoints, publish)

    def _publish_metrics(self, ips: list[str]) -> None:
        """`kthena-system/kthena-router-metrics` and its Endpoints: the running ModelRoute routers."""
        ns_rt, svc_rt, ep_rt = self.rt("", "namespaces"), self.rt("", "services"), self.rt("", "endpoints")
        if self.api.find(ns_rt, "", METRICS_NAMESPACE) is None:
            labels = {"kubernetes.io/metadata.name": METRICS_NAMESPACE}
            self.api.create(
                ns_rt, "", {"metadata": {"name": METRICS_NAMESPACE, "labels": labels}}, manager=self.name
            )
        meta = {
            "name": METRICS_SERVICE,
            "namespace": METRICS_NAMESPACE,
            "labels": {"app.kubernetes.io/component": METRICS_SERVICE},
        }
        if self.api.find(svc_rt, METRICS_NAMESPACE, METRICS_SERVICE) is None:
            spec = {
                "ports": [{"name": "metrics", "port": ROUTE_PORT, "targetPort": ROUTE_PORT}],
                "type": "ClusterIP",
            }
            self.api.create(svc_rt, METRICS_NAMESPACE, {"metadata": meta, "spec": spec}, manager=self.name)
        subsets = (
            [
                {
                    "addresses": [{"ip": ip} for ip in ips],
                    "ports": [{"name": "metrics", "port": ROUTE_PORT, "protocol": "TCP"}],
                }
            ]
            if ips
            else []
        )
        current = self.api.find(ep_rt, METRICS_NAMESPACE, METRICS_SERVICE)
        if current is None:
            self.api.create(
                ep_rt, METRICS_NAMESPACE, {"metadata": meta, "subsets": subsets}, manager=self.name
            )
        elif (current.get("subsets") or []) != subsets:
            self.api.write(ep_rt, {**current, "subsets": subsets}, self.name)

    def _annotate(self, rt: Any, obj: dict[str, Any], url: str) -> None:
        current = self.api.find(rt, obj["metadata"]["namespace"], obj["metadata"]["name"])
        if current is None or (current["metadata"].get("annotations") or {}).get(URL_ANNOTATION) == url:
            return
        current["metadata"].setdefault("annotations", {})[URL_ANNOTATION] = url
        self.api.write(rt, current, self.name)
