"""The Kthena router's own metrics, read for the hit-rate breakdown: how often its prefix-cache plugin
found the prompt's blocks on a candidate pod.

Kthena runs one router for every model. Its chart (volcano-sh/kthena
``charts/kthena/charts/networking/templates/kthena-router/component/service.yaml``) puts ``/metrics`` of
each replica behind the Service ``kthena-system/kthena-router-metrics``, port ``metrics`` (the
``--metrics-port`` flag, 9090, ``cmd/kthena-router/main.go``). Telemetry reads that Service's Endpoints
(setting ``KTHENA_ROUTER_METRICS_SERVICE``), one address per replica, through the cluster's metrics
source:

* ``direct``: each address's ``/metrics``;
* ``proxy``: each replica through the API server's pods proxy (its Endpoints ``targetRef``), or the
  Service's proxy for an address that names no pod;
* ``prometheus``: the replicas' series by namespace and pod label.

From each replica: the histogram ``kthena_router_prefix_cache_match_ratio{model}``
(``pkg/kthena-router/metrics/metrics.go``) of the topology's model, its count (match attempts) and its
``le="0"`` bucket (misses). The increments since the previous collection, summed over the replicas
(a new or restarted replica's first reading is its baseline), are the snapshot's ``router`` readings and
the stored series ``router.match_attempts`` / ``router.match_misses``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.cache import cache

import kube
from clusters.metrics import MetricsSettings
from telemetry.assemble import PodResult, PodTarget
from telemetry.parse import MATCH_FIELD, RawSample
from telemetry.scrape import ScrapeRequest, scraper
from telemetry.snapshot import RouterReading
from telemetry.sources import DIRECT, ApiProxyTransport, PrometheusSource, Transport

STATE_TTL = 3600
ROLE = "router"


def metrics_service() -> tuple[str, str]:
    namespace, _, name = str(settings.KTHENA_ROUTER_METRICS_SERVICE).partition("/")
    return namespace, name


def replica_targets(endpoints: Mapping[str, Any]) -> list[PodTarget]:
    """One target per ready address of the Service's port ``metrics`` (its only port when it names
    none); named after the address's pod, else its IP (pure)."""
    targets = []
    for subset in endpoints.get("subsets") or []:
        ports = subset.get("ports") or []
        port = next((p for p in ports if p.get("name") == "metrics"), ports[0] if len(ports) == 1 else None)
        if port is None or not port.get("port"):
            continue
        for address in subset.get("addresses") or []:
            ip = str(address.get("ip") or "")
            ref = address.get("targetRef") or {}
            name = str(ref.get("name") or "") if ref.get("kind", "Pod") == "Pod" else ""
            if ip:
                targets.append(PodTarget(name or ip, ROLE, ip, int(port["port"]), True, "Running"))
    return targets


def match_counts(raw: RawSample, model: str) -> tuple[float, float] | None:
    """(attempts, misses) of ``model`` in one replica's sample: the histogram's count and its ``le="0"``
    bucket; None when the replica has no such series (pure)."""
    histogram = raw["histograms"].get(MATCH_FIELD + model)
    if histogram is None:
        return None
    misses = next((count for bound, count in histogram["buckets"] if bound <= 0.0), 0.0)
    return histogram["count"], misses


def increments(
    previous: Mapping[str, tuple[float, float]], current: Mapping[str, tuple[float, float]]
) -> tuple[float, float] | None:
    """Attempts and misses since the previous reading, summed over the replicas read both times; a
    counter that went down (a restarted replica) counts from zero. None when no replica was read
    twice (pure)."""
    attempts = misses = 0.0
    both = False
    for replica, (count, missed) in current.items():
        before = previous.get(replica)
        if before is None:
            continue
        both = True
        reset = count < before[0] or missed < before[1]
        attempts += count if reset else count - before[0]
        misses += missed if reset else missed - before[1]
    return (attempts, misses) if both else None


@dataclass(frozen=True)
class ServiceProxyTransport:
    """``/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/{path}``: an address without a pod."""

    namespace: str
    service: str
    proxy: kube.ProxyTransport
    kind: str = "proxy"
    prefix: str = "metrics source proxy: "

    @property
    def headers(self) -> Mapping[str, str] | None:
        return self.proxy.headers

    @property
    def ssl(self) -> Any:
        return self.proxy.ssl_context or True

    def url(self, target: PodTarget, path: str) -> str:
        segment = quote(f"{self.service}:{target.port}", safe=":")
        return (
            f"{self.proxy.server.rstrip('/')}/api/v1/namespaces/{quote(self.namespace, safe='')}"
            f"/services/{segment}/proxy/{path.lstrip('/')}"
        )

    def failure(self, status: int, body: str, url: str) -> str:
        from kube.proxy import describe_proxy_failure

        return self.prefix + describe_proxy_failure(status, body).replace("pods/proxy", "services/proxy")


def _read(
    source: MetricsSettings,
    conn: kube.ClusterConnection,
    namespace: str,
    service: str,
    targets: list[PodTarget],
    timeout_s: float,
) -> list[PodResult]:
    named = [t for t in targets if t.name != t.ip]
    if source.source == "prometheus":
        prometheus = PrometheusSource(
            source.prometheus_url,
            token=source.prometheus_token,
            username=source.prometheus_username,
            password=source.prometheus_password,
        )
        results = scraper().query(prometheus, namespace, named, timeout_s=timeout_s)
        return results + [
            PodResult(
                target=t, error=f"router replica {t.ip} names no pod: Prometheus cannot tell its series"
            )
            for t in targets
            if t.name == t.ip
        ]
    if source.source != "proxy":
        return scraper().scrape([ScrapeRequest(t) for t in targets], timeout_s=timeout_s, transport=DIRECT)
    proxy = kube.proxy_transport(conn)
    by_pod: Transport = ApiProxyTransport(namespace, proxy)
    by_service: Transport = ServiceProxyTransport(namespace, service, proxy)
    results = scraper().scrape([ScrapeRequest(t) for t in named], timeout_s=timeout_s, transport=by_pod)
    unnamed = [ScrapeRequest(t) for t in targets if t.name == t.ip]
    return results + scraper().scrape(unnamed, timeout_s=timeout_s, transport=by_service)


def _state_key(topology_id: int) -> str:
    return f"telemetry:router:{topology_id}"


def router_read(
    *, source: MetricsSettings, conn: kube.ClusterConnection, topology_id: int, model: str, timeout_s: float
) -> RouterReading:
    """This interval's match attempts and misses of ``model`` on the router, remembering each replica's
    counts for the next interval."""
    namespace, service = metrics_service()
    reading = RouterReading(
        service=f"{namespace}/{service}", replicas=0, match_attempts=None, match_misses=None, error=None
    )
    try:
        endpoints = kube.get_object(conn, "v1", "Endpoints", namespace, service)
    except kube.KubeError as exc:
        reading["error"] = f"cannot read the router's Endpoints {namespace}/{service}: {exc.message}"
        return reading
    targets = replica_targets(endpoints or {})
    if not targets:
        reading["error"] = f"the router's metrics Service {namespace}/{service} has no ready address"
        return reading
    current: dict[str, tuple[float, float]] = {}
    errors = []
    for result in _read(source, conn, namespace, service, targets, timeout_s):
        if result.raw is None:
            errors.append(result.error or f"router replica {result.target.name}: no answer")
            continue
        counts = match_counts(result.raw, model)
        if counts is not None and all(math.isfinite(v) for v in counts):
            current[result.target.name] = counts
    reading["replicas"] = len(targets) - len(errors)
    if errors:
        reading["error"] = errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
    elif not current:
        reading["error"] = (
            f"the router exports no kthena_router_prefix_cache_match_ratio for model {model}"
            " (its prefix-cache score plugin is off, or no request of the model came yet)"
        )
    key = _state_key(topology_id)
    previous = cache.get(key) or {}
    found = increments({k: (v[0], v[1]) for k, v in previous.items()}, current)
    if found is not None:
        reading["match_attempts"], reading["match_misses"] = found
    cache.set(key, {**previous, **current}, STATE_TTL)
    return reading
