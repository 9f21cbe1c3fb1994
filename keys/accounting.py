"""Writes of what keys did: failed authentications, the hourly usage roll-up, budget alerts."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.db import transaction

from audit.models import AuditEvent
from audit.services import audit_record
from controlplane import broadcast
from keys import limits
from keys.models import ApiKey, ApiKeyUsage

logger = logging.getLogger(__name__)
AUDITED_FAILURES_PER_MINUTE = 20


def _failure_key(source_ip: str | None, minute: str) -> str:
    return limits.counter_key("auth-failures", source_ip or "unknown", minute)


def auth_failures_recent(*, source_ip: str | None) -> int:
    """Failed key authentications from this address in the current minute (0 when Redis is away)."""
    try:
        value: Any = limits.client().get(_failure_key(source_ip, limits.Windows.at(limits.now_utc()).minute))
    except redis.RedisError:
        return 0
    return int(value or 0)


@transaction.atomic
def key_auth_failure_record(
    *, code: str, source_ip: str | None, path: str, display_prefix: str = "", key_id: str | None = None
) -> None:
    """Count a failure per address; audit the first ones of each minute (a flood cannot fill the log)."""
    try:
        counter = _failure_key(source_ip, limits.Windows.at(limits.now_utc()).minute)
        pipe = limits.client().pipeline(transaction=False)
        pipe.incr(counter)
        pipe.expire(counter, 120)
        count = int(pipe.execute()[0])
    except redis.RedisError:
        count = 1
    if count > AUDITED_FAILURES_PER_MINUTE:
        return
    target = ApiKey.objects.filter(pk=key_id).first() if key_id else None
    detail: dict[str, Any] = {"reason": code, "path": path[:200]}
    if display_prefix:
        detail["key_prefix"] = display_prefix
    if count == AUDITED_FAILURES_PER_MINUTE:
        detail["note"] = "further failures from this address this minute are counted, not listed"
    audit_record(
        action="key.auth_failed", target=target, source_ip=source_ip, detail=detail, actor_label="anonymous"
    )


def _hour(label: str) -> datetime:
    return datetime.strptime(label, "%Y%m%d%H").replace(tzinfo=UTC)


def key_usage_rollup() -> int:
    """Copy the hourly counters of keys used since the last run into the database (idempotent)."""
    r = limits.client()
    dirty = limits.dirty_key()
    claimed = f"{dirty}:rolling"
    try:
        r.rename(dirty, claimed)
    except redis.ResponseError:  # nothing used since the last run
        return 0
    members: Any = r.smembers(claimed)
    key_ids = [value.decode() for value in members]
    now = limits.now_utc()
    hours = sorted({limits.Windows.at(now).hour, limits.Windows.at(now - timedelta(hours=1)).hour})
    rows = 0
    for key_id in key_ids:
        if not ApiKey.objects.filter(pk=key_id).exists():
            continue
        pipe = r.pipeline(transaction=False)
        for hour in hours:
            pipe.hgetall(limits.usage_key(key_id, hour))
        pipe.hgetall(limits.last_used_key(key_id))
        *usage, last = pipe.execute()
        for hour, counts in zip(hours, usage, strict=True):
            if not counts:
                continue
            values = {k.decode(): int(v) for k, v in counts.items()}
            ApiKeyUsage.objects.update_or_create(
                key_id=key_id,
                hour=_hour(hour),
                defaults={
                    "requests": values.get("requests", 0),
                    "tokens": values.get("tokens", 0),
                    "denied": values.get("denied", 0),
                },
            )
            rows += 1
        if last:
            used = {k.decode(): v.decode() for k, v in last.items()}
            when = datetime.fromtimestamp(float(used["t"]), UTC)
            ApiKey.objects.filter(pk=key_id).update(last_used_at=when, last_used_ip=used.get("ip") or None)
    r.delete(claimed)
    return rows


def budget_label(crossed: str) -> tuple[str, str, int]:
    """'requests_per_day:20261201:80' -> ('requests_per_day', '20261201', 80)."""
    quota, window, pct = crossed.rsplit(":", 2)
    return quota, window, int(pct)


@transaction.atomic
def key_budget_alert_record(*, key_id: str, crossed: str) -> bool:
    """Record a crossed budget threshold once per window and tell the owner's open pages."""
    key = ApiKey.objects.select_related("owner").filter(pk=key_id).first()
    if key is None:
        return False
    quota, window, pct = budget_label(crossed)
    already = AuditEvent.objects.filter(
        action="key.budget_alert", target_id=str(key.pk), detail__label=crossed
    ).exists()
    if already:
        return False
    allowed = getattr(key, quota, None)
    message = f"Key {key.name} has used {pct} % of its {quota.replace('_', ' ')} quota ({allowed})."
    audit_record(
        action="key.budget_alert",
        target=key,
        actor_label="system",
        detail={"label": crossed, "quota": quota, "window": window, "percent": pct, "allowed": allowed},
    )
    broadcast.broadcast_on_commit(
        broadcast.user_group(key.owner_id),
        {
            "type": "key.budget_alert",
            "key": str(key.pk),
            "name": key.name,
            "percent": pct,
            "quota": quota,
            "message": message,
        },
    )
    return True
