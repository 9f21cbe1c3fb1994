"""Reads of keys: the hot path's record, what a user may see, live status and usage."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from accounts.roles import Role
from keys import limits
from keys.models import ApiKey, ApiKeySecret, ApiKeyUsage, KeyPolicy, Status
from keys.records import KeyRecord, Limits, effective_scopes, parse_cidrs

QUOTAS = (
    ("requests_per_day", "requests_today"),
    ("requests_per_month", "requests_this_month"),
    ("tokens_per_day", "tokens_today"),
    ("tokens_per_month", "tokens_this_month"),
)


def key_id_for_digest(*, digest: str) -> str | None:
    found = ApiKeySecret.objects.filter(digest=digest).values_list("key_id", flat=True).first()
    return str(found) if found is not None else None


def key_record_for_digest(*, digest: str, generation: str) -> KeyRecord | None:
    secret = ApiKeySecret.objects.select_related("key__owner").filter(digest=digest).first()
    if secret is None:
        return None
    key = secret.key
    owner = key.owner
    return KeyRecord(
        key_id=str(key.pk),
        name=key.name,
        kind=key.kind,
        owner_id=owner.pk,
        owner_username=owner.get_username(),
        owner_active=owner.is_active,
        scopes=effective_scopes(
            scopes=list(key.scopes),
            kind=key.kind,
            owner_role=owner.role,
            owner_active=owner.is_active,
        ),
        allowed_models=tuple(key.allowed_models or ()),
        cidrs=parse_cidrs(list(key.allowed_cidrs or [])),
        limits=limits_of(key),
        expires_at=key.expires_at,
        revoked_at=key.revoked_at,
        secret_retires_at=secret.retires_at,
        generation=generation,
    )


def limits_of(key: ApiKey) -> Limits:
    return Limits(
        requests_per_minute=key.requests_per_minute,
        tokens_per_minute=key.tokens_per_minute,
        max_concurrent=key.max_concurrent,
        requests_per_day=key.requests_per_day,
        requests_per_month=key.requests_per_month,
        tokens_per_day=key.tokens_per_day,
        tokens_per_month=key.tokens_per_month,
        alert_thresholds=tuple(int(t) for t in key.alert_thresholds or ()),
    )


def key_policy() -> KeyPolicy:
    """The site-wide key rules: the stored row, or the defaults until an admin changes one."""
    return KeyPolicy.objects.filter(pk=1).select_related("updated_by").first() or KeyPolicy(pk=1)


def may_issue_own_inference_keys(*, user: Any) -> bool:
    """Operators and admins always may; viewers while the key policy lets them (the default)."""
    return bool(user.has_role(Role.OPERATOR) or key_policy().viewers_issue_inference_keys)


def user_manages_all_keys(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.has_role(Role.ADMIN))


def keys_visible_to(*, user: Any) -> QuerySet[ApiKey]:
    """Admins see every key; everyone else only their own."""
    queryset = ApiKey.objects.select_related("owner", "created_by").prefetch_related("secrets")
    if user_manages_all_keys(user):
        return queryset
    return queryset.filter(owner=user)


@dataclass(frozen=True)
class LiveState:
    status: str
    usage: dict[str, int]
    exhausted: list[dict[str, Any]]  # quota name, used, allowed, resets_at


def key_live_state(*, key: ApiKey, now: datetime | None = None) -> LiveState:
    """Status with exhaustion, from the counters in force now (Redis down: status from the row alone)."""
    when = now or timezone.now()
    stored = key.stored_status(when)
    try:
        usage = limits.current_usage(str(key.pk), when)
    except Exception:  # Redis unreachable: a limited key may be used up, and nothing can tell
        limited = any(getattr(key, quota) is not None for quota, _counter in QUOTAS) or any(
            getattr(key, name) is not None
            for name in ("requests_per_minute", "tokens_per_minute", "max_concurrent")
        )
        status = Status.UNKNOWN if stored == Status.ACTIVE and limited else stored
        return LiveState(status=status, usage={}, exhausted=[])
    exhausted = []
    for quota, counter in QUOTAS:
        allowed = getattr(key, quota)
        if allowed is not None and usage.get(counter, 0) >= allowed:
            exhausted.append(
                {
                    "quota": quota,
                    "used": usage[counter],
                    "allowed": allowed,
                    "resets_at": limits.reset_time(quota, when).isoformat(),
                }
            )
    status = Status.EXHAUSTED if stored == Status.ACTIVE and exhausted else stored
    return LiveState(status=status, usage=usage, exhausted=exhausted)


def key_usage_history(*, key: ApiKey, hours: int = 168) -> list[ApiKeyUsage]:
    since = timezone.now() - timedelta(hours=hours)
    return list(ApiKeyUsage.objects.filter(key=key, hour__gte=since).order_by("hour"))


def key_current_secret(*, key: ApiKey) -> ApiKeySecret | None:
    return key.secrets.filter(retires_at__isnull=True).order_by("-created").first()


def model_for_key(*, key: ApiKey) -> str:
    """A model id the key may call, for its client snippets: its first allowed model, else a deployed one."""
    if key.allowed_models:
        return str(key.allowed_models[0])
    from topologies.models import Topology

    name = (
        Topology.objects.filter(deployed_revision__isnull=False)
        .order_by("name")
        .values_list("model_name", flat=True)
        .first()
        or Topology.objects.order_by("name").values_list("model_name", flat=True).first()
    )
    return name or "<model>"


def aliases_for_model(*, model: str) -> tuple[str, ...]:
    """The other names the gateway serves `model` under (its topology's aliases), for the snippets."""
    from gateway.models import Route

    for route in Route.objects.select_related("topology"):
        names = (route.topology.model_name, *route.aliases)
        if model in names:
            return tuple(name for name in names if name != model)
    return ()


def key_usage_by_key(*, key_ids: list[Any], hours: int = 24) -> dict[str, list[tuple[datetime, int]]]:
    """Requests per hour of several keys over the last `hours` hours, in one query (the list's sparklines)."""
    since = timezone.now() - timedelta(hours=hours)
    found: dict[str, list[tuple[datetime, int]]] = {str(pk): [] for pk in key_ids}
    rows = ApiKeyUsage.objects.filter(key_id__in=key_ids, hour__gte=since).order_by("hour")
    for key_id, hour, requests in rows.values_list("key_id", "hour", "requests"):
        found[str(key_id)].append((hour, requests))
    return found


def key_audit_trail(*, key: ApiKey, limit: int = 200) -> QuerySet[Any]:
    """Audit events whose target is this key, newest first: changes, rotations, failures, budget alerts."""
    from audit.models import AuditEvent

    return AuditEvent.objects.filter(target_type=ApiKey._meta.label_lower, target_id=str(key.pk)).order_by(
        "-created", "-id"
    )[:limit]
