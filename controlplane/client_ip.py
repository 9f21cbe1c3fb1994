"""The client's address, believing X-Forwarded-For only when it comes from a trusted proxy."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _parse(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # [v6]:port
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # v4:port
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def is_trusted_proxy(address: str, trusted: list[str] | tuple[str, ...]) -> bool:
    parsed = _parse(address)
    if parsed is None:
        return False
    return any(parsed in network for network in _networks(tuple(trusted)))


def resolve_client_ip(remote_addr: str | None, forwarded_for: str | None, trusted: list[str]) -> str | None:
    """Pure rule: walk X-Forwarded-For from the right, skipping trusted proxies; the first hop that
    is not a trusted proxy is the client. Without a trusted peer the header is ignored entirely."""
    peer = _parse(remote_addr or "")
    if peer is None:
        return None
    if not forwarded_for or not trusted or not is_trusted_proxy(str(peer), trusted):
        return str(peer)
    client = str(peer)
    for hop in reversed([part for part in forwarded_for.split(",") if part.strip()]):
        parsed = _parse(hop)
        if parsed is None:
            break
        client = str(parsed)
        if not is_trusted_proxy(client, trusted):
            break
    return client


def client_ip(request: Any) -> str | None:
    """Works for Django and DRF requests (both expose META)."""
    if request is None:
        return None
    meta = getattr(request, "META", {})
    return resolve_client_ip(
        meta.get("REMOTE_ADDR"), meta.get("HTTP_X_FORWARDED_FOR"), list(settings.TRUSTED_PROXIES)
    )
