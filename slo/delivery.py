"""Notification writes: targets (webhook URLs encrypted at rest, never shown back whole), the
deliveries an alert's transition makes, and one attempt of a delivery with bounded exponential back-off."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from audit.services import audit_record
from controlplane.api.errors import DomainError
from slo import burn, payloads
from slo.models import (
    AlertEvent,
    AlertEventKind,
    Delivery,
    DeliveryAttempt,
    DeliveryEvent,
    DeliveryState,
    NotificationTarget,
    SloAlert,
    TargetFormat,
)

LEASE = timedelta(minutes=2)  # a claimed delivery whose worker died is tried again after this
TIMEOUT_SECONDS = 5.0


def _invalid(field: str, message: str) -> DomainError:
    return DomainError(f"{field}: {message}", code="invalid", fields={field: [message]})


def _check_url(url: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _invalid("url", "give the webhook's full http:// or https:// URL")
    return url


def _target_detail(target: NotificationTarget) -> dict[str, Any]:
    return {
        "target": target.pk,
        "name": target.name,
        "format": target.format,
        "topology": target.topology_id,
        "url": payloads.mask_url(target.url),
        "enabled": target.enabled,
    }


@transaction.atomic
def target_create(
    *,
    name: str,
    url: str,
    format: str = TargetFormat.JSON,
    topology: Any = None,
    actor: Any = None,
    source_ip: str | None = None,
) -> NotificationTarget:
    name = name.strip()
    if not name:
        raise _invalid("name", "give the target a name (for example: on-call Slack)")
    if NotificationTarget.objects.filter(name=name).exists():
        raise _invalid("name", f"a target called {name} exists; choose another name")
    if format not in TargetFormat.values:
        raise _invalid("format", f"choose one of {', '.join(TargetFormat.values)}")
    target = NotificationTarget.objects.create(
        name=name,
        url=_check_url(url),
        format=format,
        topology=topology,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    audit_record(
        action="slo.target_created",
        actor=actor,
        target=target,
        source_ip=source_ip,
        detail=_target_detail(target),
    )
    return target


@transaction.atomic
def target_update(
    *, target: NotificationTarget, changes: dict[str, Any], actor: Any = None, source_ip: str | None = None
) -> NotificationTarget:
    before = _target_detail(target)
    if "name" in changes:
        name = str(changes["name"]).strip()
        if not name:
            raise _invalid("name", "give the target a name")
        if NotificationTarget.objects.filter(name=name).exclude(pk=target.pk).exists():
            raise _invalid("name", f"a target called {name} exists; choose another name")
        target.name = name
    if "url" in changes:
        target.url = _check_url(str(changes["url"]))
    if "format" in changes:
        if changes["format"] not in TargetFormat.values:
            raise _invalid("format", f"choose one of {', '.join(TargetFormat.values)}")
        target.format = changes["format"]
    if "enabled" in changes:
        target.enabled = bool(changes["enabled"])
    if "topology" in changes:
        target.topology = changes["topology"]
    target.save()
    after = _target_detail(target)
    changed = {k: [before[k], after[k]] for k in after if before[k] != after[k]}
    if "url" in changes and "url" not in changed:
        changed["url"] = [before["url"], after["url"] + " (new URL)"]
    if changed:
        audit_record(
            action="slo.target_updated",
            actor=actor,
            target=target,
            source_ip=source_ip,
            detail={"changes": changed},
        )
    return target


@transaction.atomic
def target_delete(*, target: NotificationTarget, actor: Any = None, source_ip: str | None = None) -> None:
    audit_record(
        action="slo.target_deleted",
        actor=actor,
        target=target,
        source_ip=source_ip,
        detail=_target_detail(target),
    )
    target.delete()


def _enqueue(delivery_id: int) -> None:
    from slo import tasks

    transaction.on_commit(lambda: tasks.deliver.delay(delivery_id))


def _page_url(topology_id: int) -> str:
    base = str(settings.TANDEM_EXTERNAL_URL).rstrip("/")
    return f"{base}{reverse('topologies:detail', args=[topology_id])}#slo"


def alert_info(alert: SloAlert, status: dict[str, Any]) -> payloads.AlertInfo:
    slo = alert.slo
    return payloads.AlertInfo(
        alert_id=alert.pk,
        topology_id=slo.topology_id,
        topology=slo.topology.name,
        slo_id=slo.pk,
        sli=slo.sli,
        slo=slo.describe(),
        severity=alert.severity,
        status="resolved" if alert.ended else "firing",
        rule=alert.rule,
        burn_threshold=alert.burn_threshold,
        long_burn=alert.long_burn,
        short_burn=alert.short_burn,
        budget_remaining=status.get("budget_remaining"),
        started=alert.started.isoformat().replace("+00:00", "Z"),
        ended=alert.ended.isoformat().replace("+00:00", "Z") if alert.ended else None,
        url=_page_url(slo.topology_id),
    )


def _targets_for(topology_id: int) -> list[NotificationTarget]:
    return list(
        NotificationTarget.objects.filter(Q(topology__isnull=True) | Q(topology_id=topology_id), enabled=True)
    )


def notify_transition(*, alert: SloAlert, status: dict[str, Any], now: datetime) -> list[Delivery]:
    """One delivery per target for the alert's firing or resolving, unless its SLO is silenced (then the
    hold is recorded on the alert instead)."""
    slo = alert.slo
    event = DeliveryEvent.RESOLVED if alert.ended else DeliveryEvent.FIRING
    if slo.silenced_until is not None and slo.silenced_until > now:
        AlertEvent.objects.create(
            alert=alert,
            kind=AlertEventKind.SUPPRESSED,
            at=now,
            detail={"event": event, "until": slo.silenced_until.isoformat(), "reason": slo.silence_reason},
        )
        return []
    info = alert_info(alert, status)
    made = []
    for target in _targets_for(slo.topology_id):
        body = payloads.render(target.format, info, receiver=target.name)
        made.append(
            Delivery.objects.create(
                target=target, alert=alert, event=event, payload=body, next_attempt=timezone.now()
            )
        )
    for delivery in made:
        _enqueue(delivery.pk)
    return made


@transaction.atomic
def target_test(*, target: NotificationTarget, actor: Any = None, source_ip: str | None = None) -> Delivery:
    """Send a made-up firing alert to the target, marked as a test, to check the URL and the format."""
    now = timezone.now()
    info = payloads.AlertInfo(
        alert_id=0,
        topology_id=target.topology_id or 0,
        topology=target.topology.name if target.topology else "test",
        slo_id=0,
        sli="ttft",
        slo="TEST NOTIFICATION from Tandem: 99 % of requests have TTFT ≤ 800 ms over 28 days",
        severity="page",
        status="firing",
        rule="page 1 h/5 m",
        burn_threshold=13.44,
        long_burn=20.0,
        short_burn=22.0,
        budget_remaining=0.5,
        started=now.isoformat().replace("+00:00", "Z"),
        ended=None,
        url=_page_url(target.topology_id) if target.topology_id else str(settings.TANDEM_EXTERNAL_URL) or "/",
    )
    body = payloads.render(target.format, info, receiver=target.name)
    delivery = Delivery.objects.create(
        target=target, event=DeliveryEvent.TEST, payload=body, next_attempt=now
    )
    audit_record(
        action="slo.target_tested",
        actor=actor,
        target=target,
        source_ip=source_ip,
        detail={"delivery": delivery.pk},
    )
    _enqueue(delivery.pk)
    return delivery


def _without_secrets(text: str, url: str) -> str:
    """An error's text with the URL's path, query and credentials (where tokens live) masked."""
    parts = urlsplit(url)
    text = text.replace(url, payloads.mask_url(url))
    secrets = [
        parts.path + (f"?{parts.query}" if parts.query else ""),
        parts.path,
        parts.query,
        parts.password or "",
    ]
    for secret in sorted({s for s in secrets if len(s) > 1}, key=len, reverse=True):
        text = text.replace(secret, "/…" + secret[-4:])
    return text


def _post(url: str, body: dict[str, Any]) -> tuple[int | None, str]:
    try:
        response = requests.post(url, json=body, timeout=TIMEOUT_SECONDS, allow_redirects=False)
    except requests.RequestException as error:
        return None, f"{type(error).__name__}: {_without_secrets(str(error), url)}"[:500]
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    return response.status_code, f"HTTP {response.status_code}: {response.text[:200]}"[:500]


def delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> float | None:
    """Try a due delivery once: claim it, POST its body, record the attempt. Returns the seconds to wait
    before the next attempt, or None when there is nothing more to do (delivered, given up, not due,
    or claimed by another worker)."""
    now = now or timezone.now()
    claimed = Delivery.objects.filter(
        Q(state__in=[DeliveryState.PENDING, DeliveryState.RETRYING]) | Q(state=DeliveryState.SENDING),
        pk=delivery_id,
        next_attempt__lte=now,
    ).update(state=DeliveryState.SENDING, attempts=F("attempts") + 1, next_attempt=now + LEASE)
    if not claimed:
        return None
    delivery = Delivery.objects.select_related("target").get(pk=delivery_id)
    started = time.monotonic()
    status_code, error = _post(delivery.target.url, delivery.payload)
    took = (time.monotonic() - started) * 1000.0
    at = timezone.now()
    DeliveryAttempt.objects.create(
        delivery=delivery,
        number=delivery.attempts,
        at=at,
        status_code=status_code,
        error=error,
        duration_ms=took,
    )
    delivery.last_status, delivery.last_error = status_code, error
    delay: float | None = None
    if not error:
        delivery.state, delivery.finished = DeliveryState.DELIVERED, at
    elif delivery.attempts >= settings.SLO_DELIVERY_MAX_ATTEMPTS:
        delivery.state, delivery.finished = DeliveryState.FAILED, at
    else:
        delay = burn.backoff_seconds(delivery.attempts, base=settings.SLO_DELIVERY_BACKOFF_SECONDS)
        delivery.state, delivery.next_attempt = DeliveryState.RETRYING, at + timedelta(seconds=delay)
    delivery.save(update_fields=["state", "finished", "next_attempt", "last_status", "last_error"])
    return delay


def overdue_deliveries(*, now: datetime | None = None, grace: timedelta = timedelta(seconds=30)) -> list[int]:
    """Deliveries due for a while that no worker took (a lost task, a worker that died holding one)."""
    now = now or timezone.now()
    open_states = [DeliveryState.PENDING, DeliveryState.RETRYING, DeliveryState.SENDING]
    return list(
        Delivery.objects.filter(state__in=open_states, next_attempt__lte=now - grace).values_list(
            "pk", flat=True
        )[:100]
    )
