"""Where a cluster's metrics come from: the transport layer under the scraper.

* ``direct``: ``http://<pod IP>:<port>/<path>`` (Tandem inside the cluster, or a routed pod network);
* ``proxy``: the same path through the API server's pods proxy (``kube.proxy``; needs ``get`` on
  ``pods/proxy``);
* ``prometheus``: the cluster's Prometheus, one PromQL instant query for all the topology's pods.

All three hand the same text exposition to the same ``LineParser``: Prometheus' answer is rendered
back into exposition lines per pod (its target labels dropped), so the derivation never knows where a
sample came from. Failures are named after the source ("metrics source proxy: 403 from API server,
grant get on pods/proxy ...", "Prometheus at URL unreachable: ...") so the page says what to fix.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from kube.proxy import ProxyTransport, describe_proxy_failure
from telemetry.assemble import PodResult, PodTarget
from telemetry.parse import LineParser
from telemetry.tent import has_tent, tent_unreachable

SOURCES = ("direct", "proxy", "prometheus")
# Labels Prometheus adds (target and job labels); the engines' own labels are kept.
TARGET_LABELS = frozenset({"__name__", "job", "instance"})
SYNTHETIC = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})


class Transport(Protocol):
    @property
    def kind(self) -> str: ...

    @property
    def prefix(self) -> str:  # put before connection errors, naming the source ("" for direct)
        ...

    @property
    def headers(self) -> Mapping[str, str] | None: ...

    @property
    def ssl(self) -> ssl.SSLContext | bool: ...  # True: verify with the system's CAs

    def url(self, target: PodTarget, path: str) -> str: ...

    def failure(self, status: int, body: str, url: str) -> str: ...


@dataclass(frozen=True)
class DirectTransport:
    kind: str = "direct"
    prefix: str = ""
    headers: Mapping[str, str] | None = None
    ssl: ssl.SSLContext | bool = True

    def url(self, target: PodTarget, path: str) -> str:
        return f"http://{target.ip}:{target.port}/{path}"

    def failure(self, status: int, body: str, url: str) -> str:
        return f"{url} answered HTTP {status}"


DIRECT = DirectTransport()


@dataclass(frozen=True)
class ApiProxyTransport:
    """A pod's endpoints through ``/api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/{path}``."""

    namespace: str
    proxy: ProxyTransport
    kind: str = "proxy"
    prefix: str = "metrics source proxy: "

    @property
    def headers(self) -> Mapping[str, str] | None:
        return self.proxy.headers

    @property
    def ssl(self) -> ssl.SSLContext | bool:
        return self.proxy.ssl_context or True

    def url(self, target: PodTarget, path: str) -> str:
        return self.proxy.url(self.namespace, target.name, target.port, path)

    def failure(self, status: int, body: str, url: str) -> str:
        return self.prefix + describe_proxy_failure(status, body)


@dataclass(frozen=True)
class PrometheusSource:
    base_url: str
    token: str = field(default="", repr=False)
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    namespace_label: str = "namespace"
    pod_label: str = "pod"

    @property
    def label(self) -> str:
        return f"Prometheus at {self.base_url}"

    @property
    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        elif self.username:
            pair = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            headers["Authorization"] = f"Basic {pair}"
        return headers


_RE2_SPECIAL = frozenset(".+*?()|[]{}^$\\")


def _promql_regex_literal(text: str) -> str:
    """``text`` matched literally by an RE2 regex inside a PromQL double-quoted string (pure)."""
    return "".join(("\\\\" + c) if c in _RE2_SPECIAL else c for c in text).replace('"', '\\"')


def pod_selector(source: PrometheusSource, namespace: str, pods: Sequence[str]) -> str:
    """The PromQL selector of every series of these pods (pure)."""
    names = "|".join(_promql_regex_literal(name) for name in sorted(pods))
    namespace = namespace.replace("\\", "\\\\").replace('"', '\\"')
    return f'{{{source.namespace_label}="{namespace}",{source.pod_label}=~"{names}"}}'


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_PREFIXES: dict[tuple[tuple[str, str], ...], str] = {}  # series identity -> rendered name{labels}
_PREFIX_LIMIT = 200_000


def _prefix(metric: Mapping[str, Any], drop: frozenset[str]) -> str:
    key = tuple(metric.items())
    prefix = _PREFIXES.get(key)
    if prefix is None:
        name = metric.get("__name__", "")
        labels = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(metric.items()) if k not in drop)
        prefix = f"{name}{{{labels}}}" if labels else str(name)
        if len(_PREFIXES) > _PREFIX_LIMIT:
            _PREFIXES.clear()
        _PREFIXES[key] = prefix
    return prefix


def render_exposition(series: Sequence[Mapping[str, Any]], drop: frozenset[str]) -> str:
    """Prometheus query results (``{"metric": {...}, "value": [ts, "v"]}``) → exposition lines (pure;
    the rendered name and labels of a series are remembered, they repeat query after query)."""
    lines = []
    for item in series:
        metric = item.get("metric") or {}
        name = metric.get("__name__")
        if not name or name in SYNTHETIC:
            continue
        value = (item.get("value") or [0, "NaN"])[1]
        lines.append(f"{_prefix(metric, drop)} {value}")
    return "\n".join(lines) + "\n" if lines else ""


def split_by_pod(
    source: PrometheusSource, data: Mapping[str, Any]
) -> tuple[dict[str, list[Mapping[str, Any]]], dict[str, float]]:
    """Series per pod, and each pod's ``up`` value (pure)."""
    by_pod: dict[str, list[Mapping[str, Any]]] = {}
    up: dict[str, float] = {}
    for item in data.get("result") or []:
        metric = item.get("metric") or {}
        pod = metric.get(source.pod_label)
        if not pod:
            continue
        if metric.get("__name__") == "up":
            try:
                up[pod] = max(up.get(pod, 0.0), float(item["value"][1]))
            except (KeyError, IndexError, TypeError, ValueError):
                up[pod] = 0.0
            continue
        by_pod.setdefault(pod, []).append(item)
    return by_pod, up


async def _query(
    session: aiohttp.ClientSession, source: PrometheusSource, query: str, timeout_s: float
) -> tuple[Mapping[str, Any] | None, str | None]:
    url = source.base_url.rstrip("/") + "/api/v1/query"
    try:
        async with session.post(
            url,
            data={"query": query},
            headers=source.headers,
            timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as response:
            body = await response.read()
            status = response.status
    except aiohttp.ClientConnectorError as exc:
        return None, f"{source.label} unreachable: {exc.os_error.strerror or exc.os_error}"
    except TimeoutError:
        return None, f"{source.label} did not answer within {timeout_s:.1f} s"
    except aiohttp.ClientError as exc:
        return None, f"{source.label}: {exc.__class__.__name__} {exc}".strip()
    if status in (401, 403):
        return None, (
            f"{source.label} answered HTTP {status}: check the bearer token or basic auth on the cluster page"
        )
    try:
        doc = json.loads(body)
    except ValueError:
        return None, f"{source.label} answered HTTP {status} with a body that is not Prometheus API JSON"
    if status != 200 or doc.get("status") != "success":
        return None, f"{source.label}: query failed: {doc.get('error') or f'HTTP {status}'}"
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        return None, f"{source.label}: expected a vector result, got {data.get('resultType')!r}"
    return data, None


async def prometheus_results(
    session: aiohttp.ClientSession,
    source: PrometheusSource,
    namespace: str,
    targets: Sequence[PodTarget],
    *,
    timeout_s: float,
    parsers: dict[str, LineParser] | None = None,
) -> list[PodResult]:
    """The latest samples of each pod from one instant query, parsed like a scrape."""
    query = pod_selector(source, namespace, [t.name for t in targets])
    try:
        data, error = await asyncio.wait_for(_query(session, source, query, timeout_s), timeout_s + 0.5)
    except TimeoutError:
        data, error = None, f"{source.label} did not answer within {timeout_s:.1f} s"
    if error is not None or data is None:
        return [PodResult(target=t, error=error) for t in targets]
    by_pod, up = split_by_pod(source, data)
    drop = TARGET_LABELS | {source.namespace_label, source.pod_label}
    now = time.time()
    results = []
    for target in targets:
        if up.get(target.name) == 0.0:
            results.append(
                PodResult(
                    target=target, error=f"{source.label}: its last scrape of {target.name} failed (up == 0)"
                )
            )
            continue
        series = by_pod.get(target.name)
        if not series:
            results.append(
                PodResult(
                    target=target,
                    error=f"{source.label} has no samples of pod {target.name} in {namespace} "
                    f"(is it scraped, with labels {source.namespace_label} and {source.pod_label}?)",
                )
            )
            continue
        parser = (
            LineParser()
            if parsers is None
            else parsers.setdefault(f"prom:{namespace}/{target.name}", LineParser())
        )
        try:
            raw = parser.parse(render_exposition(series, drop), ts=now)
        except ValueError as exc:
            results.append(PodResult(target=target, error=f"{source.label}: unreadable samples ({exc})"))
            continue
        result = PodResult(target=target, raw=raw)
        if target.tent_port is not None and not has_tent(raw):
            # TENT's port is its own scrape target there, found by the same pod label
            result.tent_error = tent_unreachable(
                target.tent_port,
                f"{source.label} has no tent_* samples of pod {target.name}: scrape its port tent-metrics",
            )
        results.append(result)
    return results
