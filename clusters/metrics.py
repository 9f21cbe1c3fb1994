"""A cluster's metrics source: validating the choice, probing which sources answer, recommending one.

``probe_sources`` runs at registration (and on demand): it tries a Running pod's ``/metrics``
directly, then through the API server's pods proxy (or, with no pod to try, asks the API server
whether ``get pods/proxy`` is allowed), then the Prometheus server when one is given.
``recommend`` (pure) picks the first that answered, in the order direct, proxy, Prometheus.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import urlparse

import urllib3

import kube
from clusters.credentials import invalid
from clusters.models import MetricsSource

AUTO = "auto"
CHOICES = (AUTO, *MetricsSource.values)
PROBE_TIMEOUT_S = 2.0
_http = urllib3.PoolManager(num_pools=4, retries=False)


class SourceResult(TypedDict):
    ok: bool | None  # None: not tried
    message: str


class Probe(TypedDict):
    recommended: str
    reason: str
    checked: float
    results: dict[str, SourceResult]


@dataclass(frozen=True)
class MetricsSettings:
    """A validated choice (``source`` may be ``auto`` until a probe decides)."""

    source: str
    prometheus_url: str = ""
    prometheus_token: str = field(default="", repr=False)
    prometheus_username: str = field(default="", repr=False)
    prometheus_password: str = field(default="", repr=False)

    def stored(self) -> dict[str, str]:
        return {
            "prometheus_url": self.prometheus_url,
            "prometheus_token": self.prometheus_token,
            "prometheus_username": self.prometheus_username,
            "prometheus_password": self.prometheus_password,
        }


def validate_settings(
    *,
    source: str | None,
    prometheus_url: str | None = None,
    prometheus_token: str | None = None,
    prometheus_username: str | None = None,
    prometheus_password: str | None = None,
) -> MetricsSettings:
    chosen = (source or AUTO).strip().lower()
    if chosen not in CHOICES:
        raise invalid(
            "metrics_source", f"metrics_source {source!r} is not one of {', '.join(CHOICES)}; pick one"
        )
    url = (prometheus_url or "").strip().rstrip("/")
    if url:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise invalid(
                "prometheus_url",
                f"prometheus_url {url!r} is not an http(s) URL; give the base URL, "
                "e.g. https://prometheus.example:9090",
            )
    if chosen == MetricsSource.PROMETHEUS and not url:
        raise invalid("prometheus_url", "the Prometheus base URL is required with metrics_source prometheus")
    token = (prometheus_token or "").strip()
    username = (prometheus_username or "").strip()
    if token and username:
        raise invalid("prometheus_token", "give either a bearer token or a user name and password, not both")
    if (prometheus_password or "") and not username:
        raise invalid("prometheus_username", "basic auth needs a user name with the password")
    return MetricsSettings(chosen, url, token, username, prometheus_password or "")


def recommend(results: dict[str, SourceResult]) -> tuple[str, str]:
    """The source to use and why (pure)."""
    for name in (MetricsSource.DIRECT, MetricsSource.PROXY, MetricsSource.PROMETHEUS):
        outcome = results.get(name)
        if outcome and outcome["ok"]:
            return str(name), f"{name} answered: {outcome['message']}"
    tried = "; ".join(f"{k}: {v['message']}" for k, v in results.items() if v["ok"] is False)
    return str(MetricsSource.PROXY), (
        "no source answered yet" + (f" ({tried})" if tried else "") + "; the API-server proxy works "
        "wherever the API server is reachable once get on pods/proxy is granted"
    )


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    response = _http.request(
        "GET",
        url,
        headers=headers or {},
        timeout=urllib3.Timeout(total=PROBE_TIMEOUT_S),
        preload_content=True,
    )
    return int(response.status), bytes(response.data or b"")


def _probe_direct(pods: list[kube.ProxyPod]) -> SourceResult:
    if not pods:
        return SourceResult(ok=None, message="no Running pod with a port to try")
    pod = pods[0]
    url = f"http://{pod.ip}:{pod.port}/metrics"
    try:
        status, _ = _get(url)
    except urllib3.exceptions.HTTPError as exc:
        reason = getattr(exc, "reason", None) or exc
        return SourceResult(ok=False, message=f"{url} (pod {pod.namespace}/{pod.name}) unreachable: {reason}")
    if status != 200:
        return SourceResult(
            ok=False, message=f"{url} (pod {pod.namespace}/{pod.name}) answered HTTP {status}"
        )
    return SourceResult(ok=True, message=f"read {url} (pod {pod.namespace}/{pod.name})")


def _probe_proxy(conn: kube.ClusterConnection, pods: list[kube.ProxyPod]) -> SourceResult:
    if not pods:
        try:
            allowed = next(iter(kube.access_review(conn, [("get", "", "pods/proxy", None)]).values()))
        except kube.KubeError as exc:
            return SourceResult(ok=False, message=exc.message)
        if allowed.allowed:
            return SourceResult(ok=True, message="get on pods/proxy is allowed (no Running pod to try it on)")
        return SourceResult(ok=False, message=kube.describe_proxy_failure(403, b""))
    pod = pods[0]
    try:
        response = kube.pod_proxy_get(conn, pod.namespace, pod.name, pod.port, "metrics")
    except kube.KubeError as exc:
        return SourceResult(ok=False, message=exc.message)
    if response.status != 200:
        return SourceResult(ok=False, message=kube.describe_proxy_failure(response.status, response.data))
    return SourceResult(
        ok=True, message=f"read /metrics of pod {pod.namespace}/{pod.name} through the API server"
    )


def prometheus_headers(settings: MetricsSettings) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if settings.prometheus_token:
        headers["Authorization"] = f"Bearer {settings.prometheus_token}"
    elif settings.prometheus_username:
        headers.update(
            urllib3.make_headers(basic_auth=f"{settings.prometheus_username}:{settings.prometheus_password}")
        )
    return headers


def _probe_prometheus(settings: MetricsSettings) -> SourceResult:
    if not settings.prometheus_url:
        return SourceResult(ok=None, message="no Prometheus URL given")
    url = f"{settings.prometheus_url}/api/v1/query?query=count(up)"
    label = f"Prometheus at {settings.prometheus_url}"
    try:
        status, body = _get(url, prometheus_headers(settings))
    except urllib3.exceptions.HTTPError as exc:
        return SourceResult(ok=False, message=f"{label} unreachable: {getattr(exc, 'reason', None) or exc}")
    if status in (401, 403):
        return SourceResult(
            ok=False, message=f"{label} answered HTTP {status}: check the token or basic auth"
        )
    try:
        doc: Any = json.loads(body)
        value = doc["data"]["result"][0]["value"][1] if doc["data"]["result"] else "0"
    except (ValueError, KeyError, IndexError, TypeError):
        return SourceResult(ok=False, message=f"{label} answered HTTP {status}, not the Prometheus HTTP API")
    return SourceResult(ok=True, message=f"{label} answers ({value} scrape targets)")


def probe_sources(conn: kube.ClusterConnection, settings: MetricsSettings, namespace: str = "") -> Probe:
    """Try each source (network; no database transaction may be open)."""
    try:
        pods = kube.sample_running_pods(conn, namespace or None)
        listing = ""
    except kube.KubeError as exc:
        pods, listing = [], exc.message
    results = {
        str(MetricsSource.DIRECT): _probe_direct(pods),
        str(MetricsSource.PROXY): _probe_proxy(conn, pods),
        str(MetricsSource.PROMETHEUS): _probe_prometheus(settings),
    }
    if listing and results["direct"]["ok"] is None:
        results["direct"] = SourceResult(ok=None, message=f"no pod to try: {listing}")
    chosen, reason = recommend(results)
    return Probe(recommended=chosen, reason=reason, checked=time.time(), results=results)
