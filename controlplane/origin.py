"""Same-origin check for websockets: scheme, host and port of the page must be those of Tandem.

Browsers send the page's origin with every websocket handshake and attach the session cookie
whatever that origin is, so the origin is the only thing that stops a page on another port or
scheme of the same host from opening a stream as the user. A handshake is let through when its
``Origin`` equals the origin the request was made to (``Host`` header, or the ASGI ``server``, with
``http``/``https`` from the connection's scheme, or from ``X-Forwarded-Proto`` sent by a proxy in
``TRUSTED_PROXIES``), that host is in ``ALLOWED_HOSTS``, or the origin is listed exactly in
``CSRF_TRUSTED_ORIGINS``. Anything else, a missing ``Origin`` included, is refused before the
handshake (HTTP 403).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from controlplane.client_ip import is_trusted_proxy

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """(scheme, host, port) of an origin such as ``https://tandem.example.com:8443``; None if malformed."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def expected_origin(*, scheme: str, host_header: str | None, server: Any) -> Origin | None:
    """The origin a handshake to this host was made from when it is same-origin."""
    if host_header:
        host, port_text = split_domain_port(host_header.lower())
        if not host:
            return None
        if port_text and not (port_text.isascii() and port_text.isdigit()):
            return None
        port = int(port_text) if port_text else DEFAULT_PORTS[scheme]
        return scheme, host.strip("[]"), port
    if isinstance(server, (list, tuple)) and len(server) == 2 and server[1] is not None:
        return scheme, str(server[0]).lower(), int(server[1])
    return None


def same_origin_allowed(
    *,
    origin: str | None,
    scheme: str,
    host_header: str | None,
    server: Any,
    allowed_hosts: list[str],
    trusted_origins: list[str],
) -> bool:
    """Pure rule, see the module docstring."""
    if not origin:
        return False
    parsed = parse_origin(origin)
    if parsed is None:
        return False
    if any(parse_origin(trusted) == parsed for trusted in trusted_origins):
        return True
    expected = expected_origin(scheme=scheme, host_header=host_header, server=server)
    if expected is None or parsed != expected:
        return False
    host = f"[{expected[1]}]" if ":" in expected[1] else expected[1]
    return validate_host(host, allowed_hosts)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            try:
                return bytes(value).decode("latin1")
            except (TypeError, ValueError):
                return None
    return None


def http_scheme(scope: dict[str, Any]) -> str:
    """``https`` for wss:// or a TLS proxy in TRUSTED_PROXIES saying so; ``http`` otherwise."""
    if scope.get("scheme") == "wss":
        return "https"
    proto = (_header(scope, b"x-forwarded-proto") or "").split(",")[0].strip().lower()
    client = scope.get("client") or (None, None)
    if proto == "https" and client[0] and is_trusted_proxy(str(client[0]), list(settings.TRUSTED_PROXIES)):
        return "https"
    return "http"


class SameOriginValidator:
    """ASGI middleware for the websocket router: refuse handshakes that are not same-origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        allowed = same_origin_allowed(
            origin=_header(scope, b"origin"),
            scheme=http_scheme(scope),
            host_header=_header(scope, b"host"),
            server=scope.get("server"),
            allowed_hosts=list(settings.ALLOWED_HOSTS),
            trusted_origins=list(settings.CSRF_TRUSTED_ORIGINS),
        )
        if not allowed:
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
