"""The API server's proxy subresources: reading a pod's HTTP endpoint through the API server.

``pod_proxy_path`` builds ``/api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/{path}``; ``pod_proxy_get``
is one synchronous call (probes); ``ProxyTransport`` carries what an asyncio HTTP client needs to make
many such calls at once (telemetry): URLs, the bearer header and a TLS context that verifies the API
server like the rest of ``kube``. ``describe_proxy_failure`` turns the API server's answer into the
words an operator acts on (a 403 names the RBAC rule to grant).

Needs ``get`` on ``pods/proxy`` in the namespace (RBAC).
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kube.client import PROBE_TIMEOUT, ClusterConnection, Response, request
from kube.errors import KubeError
from kube.retry import RetryPolicy

GRANT = "grant get on pods/proxy (apiGroups: [''], resources: ['pods/proxy'], verbs: ['get'])"
_NO_RETRY = RetryPolicy(max_attempts=1)


def pod_proxy_path(namespace: str, pod: str, port: int | str, path: str) -> str:
    segment = f"{pod}:{port}" if port else pod
    return (
        f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(segment, safe=':')}/proxy/"
        f"{path.lstrip('/')}"
    )


def _status_message(body: bytes | str) -> str:
    try:
        doc = json.loads(body)
    except (ValueError, TypeError):
        return ""
    return str(doc.get("message") or "") if isinstance(doc, dict) and doc.get("kind") == "Status" else ""


def describe_proxy_failure(status: int, body: bytes | str) -> str:
    """Why a proxied request failed, for the operator (pure). The caller prefixes the source's name."""
    message = _status_message(body)
    if status == 401:
        return "401 from API server: the cluster's credentials were refused; update them on the cluster page"
    if status == 403:
        return f"403 from API server, {GRANT}" + (f" ({message})" if message else "")
    if status == 404 and message:
        return f"404 from API server: {message}"
    if status in (502, 503) and message:
        return f"{status} from API server: {message}"
    return f"HTTP {status} from the pod through the API server" + (f": {message}" if message else "")


def pod_proxy_get(conn: ClusterConnection, namespace: str, pod: str, port: int | str, path: str) -> Response:
    """GET through the pods proxy: every status is returned; connection errors raise KubeError."""
    return request(
        conn,
        "GET",
        pod_proxy_path(namespace, pod, port, path),
        accept="*/*",
        action=f"read {path} of pod {namespace}/{pod} through the API server",
        timeout=PROBE_TIMEOUT,
        policy=_NO_RETRY,
        allow=tuple(range(300, 600)),
    )


def pod_proxy_post(
    conn: ClusterConnection,
    namespace: str,
    pod: str,
    port: int | str,
    path: str,
    body: dict[str, object],
    *,
    read_seconds: float | None = None,
) -> Response:
    """POST a JSON body through the pods proxy (needs ``create`` on ``pods/proxy``): every status is
    returned; connection errors raise KubeError. Never retried: the call may change the engine.
    ``read_seconds``: how long the answer may take (an engine that answers once its work is done)."""
    timeout = PROBE_TIMEOUT if read_seconds is None else (PROBE_TIMEOUT[0], read_seconds)
    return request(
        conn,
        "POST",
        pod_proxy_path(namespace, pod, port, path),
        body=body,
        accept="*/*",
        action=f"POST {path} to pod {namespace}/{pod} through the API server",
        timeout=timeout,
        policy=_NO_RETRY,
        allow=tuple(range(300, 600)),
    )


@dataclass(frozen=True)
class ProxyTransport:
    """What an async HTTP client needs to call the proxy of one cluster (secrets kept out of repr)."""

    server: str
    headers: dict[str, str] = field(repr=False)
    ssl_context: ssl.SSLContext | None = field(repr=False)

    def url(self, namespace: str, pod: str, port: int | str, path: str) -> str:
        return self.server.rstrip("/") + pod_proxy_path(namespace, pod, port, path)


def _ssl_context(conn: ClusterConnection) -> ssl.SSLContext | None:
    if not conn.server.startswith("https://"):
        return None
    context = (
        ssl.create_default_context(cadata=conn.ca_data) if conn.ca_data else ssl.create_default_context()
    )
    if conn.client_cert and conn.client_key:
        with tempfile.TemporaryDirectory(prefix="tandem-proxy-") as directory:
            paths = []
            for name, content in (("client.crt", conn.client_cert), ("client.key", conn.client_key)):
                path = os.path.join(directory, name)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(content)
                paths.append(path)
            context.load_cert_chain(paths[0], paths[1])
    return context


_transports: dict[tuple[int, str, str], ProxyTransport] = {}


def proxy_transport(conn: ClusterConnection) -> ProxyTransport:
    """Cached per cluster and credential version."""
    key = (conn.cluster_id, conn.server, conn.credential_version)
    transport = _transports.get(key)
    if transport is None:
        for stale in [k for k in _transports if k[0] == conn.cluster_id]:
            del _transports[stale]
        headers = {"Accept": "text/plain, */*", "User-Agent": "tandem-controlplane"}
        if conn.token:
            headers["Authorization"] = f"Bearer {conn.token}"
        transport = _transports[key] = ProxyTransport(conn.server, headers, _ssl_context(conn))
    return transport


def sample_running_pods(
    conn: ClusterConnection, namespace: str | None = None, limit: int = 20
) -> list[PodTarget]:
    """A few Running pods with an IP and a container port (to try reading metrics from)."""
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods" if namespace else "/api/v1/pods"
    response = request(
        conn,
        "GET",
        path,
        query={"fieldSelector": "status.phase=Running", "limit": str(limit)},
        action="list running pods",
        timeout=PROBE_TIMEOUT,
        policy=_NO_RETRY,
    )
    found = []
    for item in (response.json() or {}).get("items") or []:
        meta, status = item.get("metadata") or {}, item.get("status") or {}
        ports = [
            int(p["containerPort"])
            for c in (item.get("spec") or {}).get("containers") or []
            for p in c.get("ports") or []
            if p.get("containerPort")
        ]
        if status.get("podIP") and ports and not meta.get("deletionTimestamp"):
            found.append(
                PodTarget(str(meta.get("namespace") or ""), str(meta["name"]), status["podIP"], ports[0])
            )
    return found


@dataclass(frozen=True)
class PodTarget:
    namespace: str
    name: str
    ip: str
    port: int


def service_ingress(conn: ClusterConnection, namespace: str, name: str) -> list[str]:
    """A Service's external addresses (``status.loadBalancer.ingress[].ip`` or ``.hostname``); [] if none."""
    response = request(
        conn,
        "GET",
        f"/api/v1/namespaces/{quote(namespace, safe='')}/services/{quote(name, safe='')}",
        action=f"read service {namespace}/{name}",
        timeout=PROBE_TIMEOUT,
        allow=(404,),
    )
    if response.status == 404:
        return []
    ingress = (((response.json() or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return [str(i.get("ip") or i.get("hostname")) for i in ingress if i.get("ip") or i.get("hostname")]


# A Service's annotation that says how its serving port speaks: "https" or "http" (wins over the port).
SERVING_SCHEME_ANNOTATION = "tandem.io/serving-scheme"


def service_url(body: dict[str, Any]) -> str:
    """``<scheme>://<external address>:<port>`` of a LoadBalancer Service object (its first port), or ""
    when it has no external address or no port (pure).

    The scheme is https when the Service says so: the annotation ``tandem.io/serving-scheme: https``
    (``http`` forces plain), else the port's ``appProtocol`` (https, or kubernetes.io/h2c: http), else
    a port named ``https`` or ``https-*`` (Istio's naming), else port 443; otherwise http."""

    def part(key: str) -> dict[str, Any]:
        found = body.get(key)
        return found if isinstance(found, dict) else {}

    meta, spec, status = part("metadata"), part("spec"), part("status")
    ingress = (status.get("loadBalancer") or {}).get("ingress") or []
    ports = spec.get("ports") or []
    address = next(
        (str(i.get("ip") or i.get("hostname")) for i in ingress if i.get("ip") or i.get("hostname")), None
    )
    if address is None or not ports:
        return ""
    port = ports[0]
    number = int(port.get("port") or 80)
    annotations = meta.get("annotations") or {}
    said = str(annotations.get(SERVING_SCHEME_ANNOTATION) or "").strip().lower()
    app_protocol = str(port.get("appProtocol") or "").lower()
    name = str(port.get("name") or "").lower()
    if said in ("http", "https"):
        scheme = said
    elif app_protocol in ("https", "http", "kubernetes.io/h2c"):
        scheme = "https" if app_protocol == "https" else "http"
    else:
        scheme = "https" if name == "https" or name.startswith("https-") or number == 443 else "http"
    host = f"[{address}]" if ":" in address else address
    return f"{scheme}://{host}:{number}"


def service_external_url(
    conn: ClusterConnection, namespace: str, name: str, *, deadline: float | None = None
) -> str:
    """The Service's serving URL (``service_url``), or "" when the cluster answers that there is none:
    the Service does not exist (the API server's own 404 NotFound) or has no external address or port.

    Anything else is no answer and raises KubeError (403, 5xx, a timeout, an unreachable cluster, a 404
    that is not the API server's): the caller keeps what it knew. ``deadline`` bounds the call with its
    retries, and each attempt's timeouts."""
    timeout = PROBE_TIMEOUT
    if deadline is not None:
        timeout = (min(PROBE_TIMEOUT[0], deadline), min(PROBE_TIMEOUT[1], deadline))
    response = request(
        conn,
        "GET",
        f"/api/v1/namespaces/{quote(namespace, safe='')}/services/{quote(name, safe='')}",
        action=f"read service {namespace}/{name}",
        timeout=timeout,
        deadline=deadline,
        allow=(404,),
    )
    if response.status == 404:
        try:
            status = json.loads(response.data)
        except (ValueError, TypeError):
            status = None
        if isinstance(status, dict) and status.get("kind") == "Status" and status.get("reason") == "NotFound":
            return ""
        raise KubeError(
            f"reading service {namespace}/{name} on {conn.label} answered 404 without the API server's "
            "NotFound status (a proxy in front of it?)",
            status=404,
        )
    body = response.json() or {}
    return service_url(body if isinstance(body, dict) else {})
