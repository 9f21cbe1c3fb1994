"""Connections to clusters: one cached ``ApiClient`` per cluster, and the one HTTP path every call takes.

TLS verification is always on. Client certificates live in private temporary files only for as long as the
client that needs them (urllib3 reads certificate chains from files).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlparse

import urllib3
from kubernetes import client as k8s

from kube.errors import KubeError, KubeUnreachable, describe_connection_error, error_from_response
from kube.retry import DEFAULT_POLICY, Action, RetryPolicy, decide

logger = logging.getLogger(__name__)

# (connect, read) seconds: short on purpose; a slow cluster should say so rather than hang a worker.
# The settings KUBE_CONNECT_TIMEOUT_SECONDS, KUBE_READ_TIMEOUT_SECONDS and KUBE_PROBE_READ_TIMEOUT_SECONDS
# override them; KUBE_CALL_DEADLINE_SECONDS bounds one call with all its retries.
DEFAULT_TIMEOUT: tuple[float, float] = (3.0, 15.0)
PROBE_TIMEOUT: tuple[float, float] = (3.0, 5.0)
DEFAULT_DEADLINE = 45.0


def _setting(name: str, default: float) -> float:
    from django.conf import settings

    if not settings.configured:  # kube used outside Django (tools): the built-in defaults
        return default
    return float(getattr(settings, name, default))


def default_timeout() -> tuple[float, float]:
    """(connect, read) seconds for an ordinary call."""
    return (
        _setting("KUBE_CONNECT_TIMEOUT_SECONDS", DEFAULT_TIMEOUT[0]),
        _setting("KUBE_READ_TIMEOUT_SECONDS", DEFAULT_TIMEOUT[1]),
    )


def probe_timeout() -> tuple[float, float]:
    """(connect, read) seconds for health probes (version, access reviews): they must answer quickly."""
    return (
        _setting("KUBE_CONNECT_TIMEOUT_SECONDS", PROBE_TIMEOUT[0]),
        _setting("KUBE_PROBE_READ_TIMEOUT_SECONDS", PROBE_TIMEOUT[1]),
    )


@dataclass(frozen=True)
class ClusterConnection:
    """Everything needed to talk to one cluster. Built by ``clusters.selectors.cluster_connection``.

    ``credential_version`` changes whenever the credentials do, so cached clients are rebuilt.
    ``cluster_name`` only decorates error messages.
    """

    cluster_id: int
    server: str
    token: str | None = field(default=None, repr=False)
    ca_data: str | None = field(default=None, repr=False)
    client_cert: str | None = field(default=None, repr=False)
    client_key: str | None = field(default=None, repr=False)
    credential_version: str = ""
    cluster_name: str = ""

    @property
    def label(self) -> str:
        return self.cluster_name or self.server


@dataclass
class _Entry:
    client: k8s.ApiClient
    tempdir: tempfile.TemporaryDirectory[str] | None


_cache: dict[tuple[int, str, str], _Entry] = {}
_cache_lock = threading.Lock()


def _write_private(directory: str, name: str, content: str) -> str:
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)
    return path


def _build(conn: ClusterConnection) -> _Entry:
    config = k8s.Configuration()
    config.host = conn.server.rstrip("/")
    config.verify_ssl = True
    config.ssl_ca_cert = None
    config.ca_cert_data = conn.ca_data or None
    # Our own retry policy governs; urllib3 must not retry underneath it.
    config.retries = urllib3.Retry(total=0, connect=0, read=0, redirect=0, status=0)
    config.connection_pool_maxsize = 8
    tempdir = None
    if conn.client_cert and conn.client_key:
        tempdir = tempfile.TemporaryDirectory(prefix="tandem-kube-")
        config.cert_file = _write_private(tempdir.name, "client.crt", conn.client_cert)
        config.key_file = _write_private(tempdir.name, "client.key", conn.client_key)
    api = k8s.ApiClient(config)
    api.user_agent = "tandem-controlplane"
    return _Entry(api, tempdir)


def api_client(conn: ClusterConnection) -> k8s.ApiClient:
    """The cached ``ApiClient`` for this cluster (keyed by id, server and credential version)."""
    key = (conn.cluster_id, conn.server, conn.credential_version)
    with _cache_lock:
        entry = _cache.get(key)
        if entry is None:
            for stale in [k for k in _cache if k[0] == conn.cluster_id]:
                _drop(stale)
            entry = _build(conn)
            _cache[key] = entry
        return entry.client


def _drop(key: tuple[int, str, str]) -> None:
    entry = _cache.pop(key, None)
    if entry is not None:
        entry.client.rest_client.close()
        if entry.tempdir is not None:
            entry.tempdir.cleanup()


def forget(cluster_id: int) -> None:
    """Close and forget the cached client(s) of a cluster (after its credentials change or it is removed)."""
    with _cache_lock:
        for key in [k for k in _cache if k[0] == cluster_id]:
            _drop(key)


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    data: bytes

    def json(self) -> Any:
        return json.loads(self.data) if self.data else None


def _headers(conn: ClusterConnection, content_type: str | None, accept: str) -> dict[str, str]:
    headers = {"Accept": accept, "User-Agent": "tandem-controlplane"}
    if conn.token:
        headers["Authorization"] = f"Bearer {conn.token}"
    if content_type:
        headers["Content-Type"] = content_type
    return headers


def _send(
    conn: ClusterConnection,
    method: str,
    url: str,
    headers: dict[str, str],
    body: Any,
    timeout: tuple[float, float],
) -> Response:
    api = api_client(conn)
    raw = api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)
    data = raw.read() if raw.data is None else raw.data
    release = getattr(raw.response, "release_conn", None)
    if callable(release):
        release()
    header_map = {str(k).lower(): str(v) for k, v in (raw.getheaders() or {}).items()}
    return Response(status=int(raw.status), headers=header_map, data=data or b"")


def request(
    conn: ClusterConnection,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    content_type: str | None = None,
    accept: str = "application/json",
    action: str = "",
    timeout: tuple[float, float] | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
    deadline: float | None = None,
    allow: tuple[int, ...] = (),
    on_conflict: Callable[[], Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Response:
    """One HTTP call with the retry policy applied; non-2xx answers (except ``allow``) raise KubeError.

    ``on_conflict``: for updates carrying a resourceVersion — called on 409 to re-read and return a new body.
    ``timeout`` is (connect, read) seconds per attempt; ``deadline`` bounds the call with its retries (no
    retry starts that could not finish in time). Both default to the KUBE_* settings.
    """
    timeout = timeout or default_timeout()
    budget = deadline if deadline is not None else _setting("KUBE_CALL_DEADLINE_SECONDS", DEFAULT_DEADLINE)
    started = time.monotonic()

    def in_time(delay: float) -> bool:
        return time.monotonic() - started + delay + timeout[0] + timeout[1] <= budget

    params = {k: v for k, v in (query or {}).items() if v is not None and v != ""}
    url = conn.server.rstrip("/") + path + (("?" + urlencode(params)) if params else "")
    if body is not None and content_type is None:
        content_type = "application/json"
    action = action or f"{method} {path}"
    attempt = 0
    while True:
        attempt += 1
        try:
            response = _send(conn, method, url, _headers(conn, content_type, accept), body, timeout)
        except KubeError:
            raise
        except (urllib3.exceptions.HTTPError, OSError, k8s.ApiException) as exc:
            if isinstance(exc, k8s.ApiException) and exc.status:
                raise error_from_response(
                    status=int(exc.status),
                    body=exc.body,
                    cluster=conn.cluster_name,
                    action=action,
                    server=conn.server,
                ) from None
            decision = decide(attempt=attempt, status=None, connection_error=True, policy=policy)
            tls = "ssl" in str(exc).lower() or "certificate" in str(exc).lower()
            if decision.retry and not tls and in_time(decision.delay):
                logger.info("retrying %s on %s after connection error", action, conn.label)
                sleep(decision.delay)
                continue
            raise KubeUnreachable(
                describe_connection_error(exc, conn.server), status=None, reason="Unreachable"
            ) from None
        if 200 <= response.status < 300 or response.status in allow:
            return response
        decision = decide(
            attempt=attempt,
            status=response.status,
            retry_after=response.headers.get("retry-after"),
            is_update=on_conflict is not None,
            policy=policy,
        )
        if decision.action is Action.REREAD and on_conflict is not None:
            body = on_conflict()
            continue
        if decision.action is Action.RETRY and in_time(decision.delay):
            logger.info("retrying %s on %s after HTTP %s", action, conn.label, response.status)
            sleep(decision.delay)
            continue
        raise error_from_response(
            status=response.status,
            body=response.data,
            cluster=conn.cluster_name,
            action=action,
            server=conn.server,
        )


def is_loopback_host(server: str) -> bool:
    """True when ``server`` points at this machine (127.0.0.0/8, ::1, localhost)."""
    host = (urlparse(server).hostname or "").lower()
    if host in {"localhost", "::1"}:
        return True
    parts = host.split(".")
    return len(parts) == 4 and parts[0] == "127" and all(p.isascii() and p.isdigit() for p in parts)
