"""The `proxy` subresource of pods and services, as kube-apiserver serves it.

`/api/v1/namespaces/{ns}/pods/{[scheme:]name[:port]}/proxy/{path}` and the same for services: the
API server itself connects to the pod (or a ready endpoint of the service) on the pod network, and
relays the method, the query string, the body and the answer's status, headers and body unchanged.
The caller's `Authorization` header is not passed on. Failures are `Status` objects like upstream:
404 for a missing pod or service, 503 `ServiceUnavailable` ("no endpoints available for service
...", "error trying to reach service: dial tcp IP:PORT: connect: connection refused"), 400 for a
port a service does not have. A pod without a port goes to port 80, as upstream (`http` default).
The request reaches this module through the ordinary resource/subresource routing (`pods/proxy`,
`services/proxy`, verb from the method), so it is authorised like every other request.
"""

from __future__ import annotations

import errno
import random
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from sandbox.apiserver.errors import ApiError, bad_request

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
        "authorization",
    }
)
DEFAULT_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=60)


@dataclass(frozen=True)
class ProxyName:
    scheme: str
    name: str
    port: str  # "" when not given; a number or a port name


def split_name(segment: str) -> ProxyName:
    """`[scheme:]name[:port]` as upstream's `net.SplitSchemeNamePort` (pure)."""
    parts = segment.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        raise bad_request(f"invalid service request {segment!r}")
    if scheme not in ("", "http", "https") or not name:
        raise bad_request(f"invalid service request {segment!r}")
    return ProxyName(scheme or "http", name, port)


def _unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message)


def pod_location(pod: dict[str, Any], wanted: ProxyName) -> tuple[str, int]:
    """Where a pod proxy request goes (pure): the pod IP and the port (number, or a container port's name)."""
    ip = (pod.get("status") or {}).get("podIP")
    if not ip:
        raise _unavailable(f'address not allowed: pod "{wanted.name}" has no IP address yet')
    if not wanted.port:
        return ip, 80
    if wanted.port.isdigit():
        return ip, int(wanted.port)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == wanted.port:
                return ip, int(port["containerPort"])
    raise bad_request(f'no such port "{wanted.port}" on pod "{wanted.name}"')


def service_location(
    service: dict[str, Any], endpoints: dict[str, Any] | None, wanted: ProxyName
) -> tuple[str, int]:
    """A ready endpoint of the service port named (or numbered) in the request, at random (pure)."""
    ports = (service.get("spec") or {}).get("ports") or []
    port: dict[str, Any] | None = None
    if wanted.port:
        port = next(
            (p for p in ports if p.get("name") == wanted.port or str(p.get("port")) == wanted.port), None
        )
        if port is None:
            raise bad_request(f'no service port "{wanted.port}" found for service "{wanted.name}"')
    elif len(ports) == 1:
        port = ports[0]
    else:
        raise bad_request(
            f'no service port specified for service "{wanted.name}", which has more than one port'
        )
    candidates: list[tuple[str, int]] = []
    for subset in (endpoints or {}).get("subsets") or []:
        subset_ports = subset.get("ports") or []
        chosen = next((p for p in subset_ports if p.get("name", "") == port.get("name", "")), None)
        if chosen is None:
            continue
        candidates += [(a["ip"], int(chosen["port"])) for a in subset.get("addresses") or [] if a.get("ip")]
    if not candidates:
        raise _unavailable(f'no endpoints available for service "{wanted.name}"')
    return random.choice(candidates)


def _dial_error(exc: BaseException, ip: str, port: int) -> ApiError:
    os_error = getattr(exc, "os_error", None) or exc
    code = getattr(os_error, "errno", None)
    what = {
        errno.ECONNREFUSED: "connect: connection refused",
        errno.EHOSTUNREACH: "connect: no route to host",
        errno.ENETUNREACH: "connect: network is unreachable",
        errno.ETIMEDOUT: "i/o timeout",
    }.get(code or 0, str(os_error) or exc.__class__.__name__)
    return _unavailable(f"error trying to reach service: dial tcp {ip}:{port}: {what}")


class Proxy:
    """Relays requests into the pod network (one client session, on the server's loop)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._insecure = ssl.create_default_context()
        # Like kube-apiserver, a pod's serving certificate is not verified for https: targets.
        self._insecure.check_hostname = False
        self._insecure.verify_mode = ssl.CERT_NONE

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=1024, limit_per_host=64, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=DEFAULT_TIMEOUT,
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def relay(
        self, request: web.Request, scheme: str, ip: str, port: int, path: str
    ) -> web.StreamResponse:
        url = f"{scheme}://{ip}:{port}/{path}"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read() if request.can_read_body else None
        try:
            async with self._client().request(
                request.method,
                url,
                params=request.rel_url.query,
                headers=headers,
                data=body,
                allow_redirects=False,
                ssl=self._insecure if scheme == "https" else True,
            ) as upstream:
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for key, value in upstream.headers.items():
                    if key.lower() not in HOP_BY_HOP:
                        response.headers.add(key, value)
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientConnectorError as exc:
            raise _dial_error(exc, ip, port) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ApiError(
                502, "BadGateway", f"error trying to reach service: {exc.__class__.__name__}: {exc}"
            ) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
