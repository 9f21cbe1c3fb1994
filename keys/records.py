"""What the hot path knows about a key: built once from the database, then served from memory (pure)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime

from keys.scopes import scopes_for_kind, scopes_for_role

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Limits:
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_concurrent: int | None = None
    requests_per_day: int | None = None
    requests_per_month: int | None = None
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    alert_thresholds: tuple[int, ...] = ()


@dataclass(frozen=True)
class KeyRecord:
    key_id: str
    name: str
    kind: str
    owner_id: int
    owner_username: str
    owner_active: bool
    scopes: frozenset[str]  # effective: the key's scopes within what its owner's role allows today
    allowed_models: tuple[str, ...]
    cidrs: tuple[IPNetwork, ...]
    limits: Limits
    expires_at: datetime
    revoked_at: datetime | None
    secret_retires_at: datetime | None  # this secret's end, when it was rotated away
    generation: str

    def allows_ip(self, source_ip: str | None) -> bool:
        if not self.cidrs:
            return True
        if not source_ip:
            return False
        try:
            address = ipaddress.ip_address(source_ip)
        except ValueError:
            return False
        return any(address in network for network in self.cidrs)

    def allows_model(self, model: str) -> bool:
        return not self.allowed_models or model in self.allowed_models


def effective_scopes(*, scopes: list[str], kind: str, owner_role: str, owner_active: bool) -> frozenset[str]:
    """A key never holds more than its kind allows and its owner's role holds now."""
    held = scopes_for_role(owner_role, active=owner_active)
    return frozenset(scopes) & held & scopes_for_kind(kind)


def parse_cidrs(values: list[str]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)
