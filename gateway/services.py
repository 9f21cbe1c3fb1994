"""Writes: a topology's gateway settings. Every change reaches every gateway process within a second."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import redis
from django.db import transaction

from audit.services import audit_record
from controlplane.api.errors import DomainError
from gateway import routes
from gateway.models import Route

logger = logging.getLogger(__name__)
SETTINGS = (
    "aliases",
    "endpoint_url",
    "fallback_base_url",
    "fallback_api_key",
    "fallback_model",
    "fallback_on_429",
    "timeout_seconds",
    "breaker_failures",
    "breaker_open_seconds",
)


def _invalid(field: str, message: str) -> DomainError:
    return DomainError(f"{field}: {message}", code="invalid", fields={field: [message]})


def _url(field: str, value: str, *, must_end_v1: bool) -> str:
    value = value.strip().rstrip("/")
    if not value:
        return ""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _invalid(field, "must be an http(s) URL, e.g. https://api.example.com/v1")
    if must_end_v1 and not parts.path.endswith("/v1"):
        raise _invalid(field, f"an OpenAI-compatible base URL ends in /v1; did you mean {value}/v1?")
    if not must_end_v1 and parts.path.endswith("/v1"):
        raise _invalid(
            field, f"give the server root without /v1 (Tandem adds it): {value.removesuffix('/v1')}"
        )
    return value


def bump_routes() -> None:
    try:
        routes.bump()
    except redis.RedisError:
        logger.warning("could not publish a gateway route change; processes see it when Redis is back")


@transaction.atomic
def route_update(
    *, topology: Any, changes: dict[str, Any], actor: Any, source_ip: str | None = None
) -> Route:
    route, _ = Route.objects.select_for_update().get_or_create(topology=topology)
    unknown = sorted(set(changes) - set(SETTINGS))
    if unknown:
        raise _invalid(unknown[0], f"cannot be set; settable: {', '.join(SETTINGS)}")
    changed: list[str] = []
    for field, value in changes.items():
        if field == "endpoint_url":
            value = _url(field, value or "", must_end_v1=False)
        elif field == "fallback_base_url":
            value = _url(field, value or "", must_end_v1=True)
        elif field == "aliases":
            names = [str(v).strip() for v in value or [] if str(v).strip()]
            if len(names) > 20 or any(len(n) > 256 for n in names):
                raise _invalid(field, "give at most 20 names of up to 256 characters")
            value = sorted(set(names))
        if getattr(route, field) != value:
            setattr(route, field, value)
            changed.append(field)
    if route.fallback_base_url and not (route.fallback_model or topology.model_name):
        raise _invalid("fallback_model", "name the model to ask the fallback for")
    if changed:
        route.save()
        transaction.on_commit(bump_routes)
        audit_record(
            action="gateway.route_update",
            actor=actor,
            target=topology,
            source_ip=source_ip,
            detail={"changed": [f for f in changed]},  # the fallback key itself is never recorded
        )
    return route
