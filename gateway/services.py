"""Writes: a topology's gateway settings. Every change reaches every gateway process within a second."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
    doubled = doubled_path(parts.path)
    if doubled is not None:
        fixed = urlunsplit(parts._replace(path=doubled))
        raise _invalid(
            field, f"the path repeats itself ({parts.path}); the client adds each path once: use {fixed}"
        )
    for endpoint in ("/chat/completions", "/completions", "/responses", "/messages", "/models"):
        if must_end_v1 and parts.path.endswith(endpoint):
            fixed = urlunsplit(parts._replace(path=parts.path.removesuffix(endpoint)))
            raise _invalid(field, f"give the base URL, not an endpoint (Tandem adds {endpoint}): {fixed}")
    if must_end_v1 and not parts.path.endswith("/v1"):
        raise _invalid(field, f"an OpenAI-compatible base URL ends in /v1; did you mean {value}/v1?")
    if not must_end_v1 and parts.path.endswith("/v1"):
        raise _invalid(
            field, f"give the server root without /v1 (Tandem adds it): {value.removesuffix('/v1')}"
        )
    return value


def doubled_path(path: str) -> str | None:
    """The path without a run of segments repeated at its end (/v1/v1 -> /v1, /api/v1/api/v1 -> /api/v1),
    or None when nothing repeats (pure)."""
    segments = [segment for segment in path.split("/") if segment]
    for size in range(1, len(segments) // 2 + 1):
        if segments[-size:] == segments[-2 * size : -size]:
            return "/" + "/".join(segments[:-size])
    return None


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
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _invalid(field, 'must be a list of model names, e.g. ["qwen", "qwen-small"]')
            names = [v.strip() for v in value if v.strip()]
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


@transaction.atomic
def probe_run_start(
    *,
    topology: Any,
    kinds: list[str] | None,
    params: dict[str, Any] | None,
    actor: Any,
    source_ip: str | None = None,
) -> Any:
    """Queue a verification run; the worker runs it after this commits."""
    from gateway.models import ProbeRun, ProbeState
    from gateway.probes import DEFAULTS, KINDS
    from gateway.tasks import run_probes

    chosen = list(kinds or KINDS)
    unknown = [k for k in chosen if k not in KINDS]
    if unknown:
        raise _invalid("kinds", f"unknown probe {unknown[0]!r}; choose from {', '.join(KINDS)}")
    given = params or {}
    extra = sorted(set(given) - set(DEFAULTS))
    if extra:
        raise _invalid(extra[0], f"is not a probe setting; settings: {', '.join(DEFAULTS)}")
    limits = {
        "prefix_words": (50, 20000),
        "prefix_requests": (2, 20),
        "prefix_margin": (0.01, 0.95),
        "concurrency_clients": (1, 64),
        "concurrency_seconds": (1, 120),
    }
    for name, value in given.items():
        low, high = limits[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            raise _invalid(name, f"must be a number from {low} to {high}")
    if ProbeRun.objects.filter(topology=topology, state__in=[ProbeState.QUEUED, ProbeState.RUNNING]).exists():
        from controlplane.api.errors import Conflict

        raise Conflict(
            "A verification of this topology is already running; wait for it.", code="probe_running"
        )
    run = ProbeRun.objects.create(topology=topology, kinds=chosen, params=given, requested_by=actor)
    audit_record(
        action="gateway.verify", actor=actor, target=topology, source_ip=source_ip, detail={"kinds": chosen}
    )
    run_probes.delay_on_commit(run.pk)
    return run


def probe_run_execute(*, run_id: int) -> None:
    """Run the probes of one queued run (idempotent: a finished run is left as it is)."""
    import asyncio

    from django.utils import timezone

    from gateway import probes
    from gateway.models import ProbeRun, ProbeState
    from gateway.routes import load_table

    claimed = ProbeRun.objects.filter(pk=run_id, state=ProbeState.QUEUED).update(
        state=ProbeState.RUNNING, started=timezone.now()
    )
    if not claimed:
        return
    run = ProbeRun.objects.select_related("topology").get(pk=run_id)
    entry = next((e for e in load_table("probe").entries() if e.topology_id == run.topology_id), None)
    if entry is None:
        ProbeRun.objects.filter(pk=run_id).update(
            state=ProbeState.ERROR,
            finished=timezone.now(),
            error="The gateway has no route to this topology: deploy it, or set its serving endpoint "
            "or a fallback.",
        )
        _probe_broadcast(run_id)
        return
    try:
        results = asyncio.run(probes.run(entry, list(run.kinds), dict(run.params)))
    except Exception as error:
        logger.exception("verification run %s failed", run_id)
        ProbeRun.objects.filter(pk=run_id).update(
            state=ProbeState.ERROR, finished=timezone.now(), error=str(error)[:2000]
        )
        _probe_broadcast(run_id)
        return
    state = ProbeState.PASSED if all(r.passed for r in results) else ProbeState.FAILED
    ProbeRun.objects.filter(pk=run_id).update(
        state=state, finished=timezone.now(), results=[r.as_dict() for r in results]
    )
    _probe_broadcast(run_id)


def _probe_broadcast(run_id: int) -> None:
    from controlplane import broadcast
    from gateway.models import ProbeRun

    run = ProbeRun.objects.get(pk=run_id)
    broadcast.send_now(
        broadcast.topology_group(run.topology_id),
        {"kind": "gateway.probe", "run": run.pk, "state": run.state},
    )


def routes_discover() -> int:
    """Refresh the discovered serving endpoint of every deployed topology; returns how many changed.

    A cluster that answers sets the endpoint (or clears it: the Service is gone or has no address);
    one that does not (403, 5xx, timeout, unreachable) leaves it as it was, marked stale with the
    reason since the first look that failed."""
    from django.utils import timezone

    from gateway.discovery import discover_all
    from topologies.models import Topology

    topologies = list(Topology.objects.filter(deployed_revision__isnull=False).select_related("cluster"))
    found = discover_all(topologies)
    now = timezone.now()
    changed = 0
    for topology in topologies:
        seen = found[topology.pk]
        route, _ = Route.objects.get_or_create(topology=topology)
        update: dict[str, Any]
        if seen.answered:
            update = {
                "discovered_url": seen.url,
                "discovered_stale_reason": "",
                "discovered_stale_since": None,
            }
        else:
            update = {
                "discovered_stale_reason": seen.reason,
                "discovered_stale_since": route.discovered_stale_since or now,
            }
        if any(getattr(route, field) != value for field, value in update.items()):
            Route.objects.filter(pk=route.pk).update(**update)
        if seen.answered and route.discovered_url != seen.url:
            changed += 1
    if changed:
        bump_routes()
    return changed
