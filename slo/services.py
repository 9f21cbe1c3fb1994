"""SLO writes: define objectives, count each telemetry interval against them, evaluate burn rates into
alerts (fire, resolve), acknowledge and silence. Notification targets and deliveries: ``slo.delivery``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from slo import burn
from slo.models import AlertEvent, AlertEventKind, AlertState, Sli, SliMinute, Slo, SloAlert
from telemetry.derive import RequestWindow

MAX_WINDOW_DAYS = 90
MAX_SILENCE = timedelta(days=30)
DEFAULT_OBJECTIVES = {Sli.TTFT: 0.99, Sli.TBT: 0.99, Sli.SUCCESS: 0.995}


def _invalid(field: str, message: str) -> DomainError:
    return DomainError(f"{field}: {message}", code="invalid", fields={field: [message]})


def _actor_label(actor: Any) -> str:
    return (
        actor.get_username() if actor is not None and getattr(actor, "is_authenticated", False) else "system"
    )


def _check(sli: str, objective: float, threshold_ms: int | None, window_days: int) -> None:
    if sli not in Sli.values:
        raise _invalid("sli", f"choose one of {', '.join(Sli.values)}")
    if not 0.5 <= objective < 1.0:
        raise _invalid("objective_percent", "give a share between 50 and 99.999 (for example 99.5)")
    if sli == Sli.SUCCESS and threshold_ms is not None:
        raise _invalid("threshold_ms", "the success SLO counts server errors and takes no latency threshold")
    if sli != Sli.SUCCESS and (threshold_ms is None or not 1 <= threshold_ms <= 600_000):
        raise _invalid("threshold_ms", "a latency SLO needs a threshold between 1 and 600000 ms")
    if not 1 <= window_days <= MAX_WINDOW_DAYS:
        raise _invalid(
            "window_days", f"choose a compliance window of 1 to {MAX_WINDOW_DAYS} days (28 is usual)"
        )


def _slo_detail(slo: Slo) -> dict[str, Any]:
    return {
        "slo": slo.pk,
        "sli": slo.sli,
        "objective": slo.objective,
        "threshold_ms": slo.threshold_ms,
        "window_days": slo.window_days,
        "enabled": slo.enabled,
        "text": slo.describe(),
    }


@transaction.atomic
def slo_create(
    *,
    topology: Any,
    sli: str,
    objective: float,
    threshold_ms: int | None = None,
    window_days: int = 28,
    actor: Any = None,
    source_ip: str | None = None,
) -> Slo:
    _check(sli, objective, threshold_ms, window_days)
    if Slo.objects.filter(topology=topology, sli=sli).exists():
        raise Conflict(
            f"sli: {topology.name} already has a {sli} SLO; change that one instead",
            fields={"sli": ["already defined for this topology"]},
        )
    slo = Slo.objects.create(
        topology=topology, sli=sli, objective=objective, threshold_ms=threshold_ms, window_days=window_days
    )
    audit_record(
        action="slo.created", actor=actor, target=topology, source_ip=source_ip, detail=_slo_detail(slo)
    )
    return slo


@transaction.atomic
def slo_create_defaults(*, topology: Any, actor: Any = None, source_ip: str | None = None) -> list[Slo]:
    """TTFT and TBT SLOs at the topology's targets (where set) and a 99.5 % success SLO, over 28 days;
    those already defined are kept."""
    thresholds: dict[str, int | None] = {
        Sli.TTFT: topology.slo_ttft_ms or None,
        Sli.TBT: topology.slo_tbt_ms or None,
        Sli.SUCCESS: None,
    }
    made = []
    for sli, threshold in thresholds.items():
        if (sli != Sli.SUCCESS and threshold is None) or Slo.objects.filter(
            topology=topology, sli=sli
        ).exists():
            continue
        made.append(
            slo_create(
                topology=topology,
                sli=sli,
                objective=DEFAULT_OBJECTIVES[Sli(sli)],
                threshold_ms=threshold,
                actor=actor,
                source_ip=source_ip,
            )
        )
    return made


@transaction.atomic
def slo_update(*, slo: Slo, changes: dict[str, Any], actor: Any = None, source_ip: str | None = None) -> Slo:
    """Change the objective, threshold, window or enabled flag. Events already counted keep the
    threshold they were counted with: a new threshold counts from now on."""
    before = _slo_detail(slo)
    objective = changes.get("objective", slo.objective)
    threshold = changes.get("threshold_ms", slo.threshold_ms)
    window = changes.get("window_days", slo.window_days)
    _check(slo.sli, objective, threshold, window)
    slo.objective, slo.threshold_ms, slo.window_days = objective, threshold, window
    slo.enabled = changes.get("enabled", slo.enabled)
    slo.save()
    if not slo.enabled:
        from slo.evaluation import resolve_firing

        resolve_firing(slo=slo, why="the SLO was disabled")
    after = _slo_detail(slo)
    changed = {k: [before[k], after[k]] for k in after if before[k] != after[k] and k != "text"}
    if changed:
        audit_record(
            action="slo.updated", actor=actor, target=slo.topology, source_ip=source_ip,
            detail={"slo": slo.pk, "sli": slo.sli, "changes": changed, "text": slo.describe()},
        )  # fmt: skip
    return slo


@transaction.atomic
def slo_delete(*, slo: Slo, actor: Any = None, source_ip: str | None = None) -> None:
    audit_record(
        action="slo.deleted", actor=actor, target=slo.topology, source_ip=source_ip, detail=_slo_detail(slo)
    )
    slo.delete()


@transaction.atomic
def slo_silence(
    *, slo: Slo, until: datetime, reason: str, actor: Any = None, source_ip: str | None = None
) -> Slo:
    """Hold this SLO's notifications until ``until`` (alerts still fire and resolve, and are shown)."""
    now = timezone.now()
    if until <= now:
        raise _invalid("until", "give a time in the future")
    if until > now + MAX_SILENCE:
        raise _invalid("until", "a silence lasts at most 30 days; silence again when it ends")
    reason = reason.strip()
    if not reason:
        raise _invalid("reason", "say why (for example: planned maintenance of the decode pool)")
    slo.silenced_until, slo.silence_reason, slo.silenced_by = until, reason[:300], _actor_label(actor)
    slo.save(update_fields=["silenced_until", "silence_reason", "silenced_by", "updated"])
    detail = {"slo": slo.pk, "sli": slo.sli, "until": until.isoformat(), "reason": slo.silence_reason}
    audit_record(action="slo.silenced", actor=actor, target=slo.topology, source_ip=source_ip, detail=detail)
    for alert in slo.alerts.filter(state=AlertState.FIRING):
        AlertEvent.objects.create(
            alert=alert, kind=AlertEventKind.SILENCED, at=now, actor=slo.silenced_by, detail=detail
        )
    return slo


@transaction.atomic
def slo_unsilence(*, slo: Slo, actor: Any = None, source_ip: str | None = None) -> Slo:
    if slo.silenced_until is None:
        raise Conflict(f"the {slo.sli} SLO of {slo.topology.name} is not silenced", code="not_silenced")
    detail = {"slo": slo.pk, "sli": slo.sli, "was_until": slo.silenced_until.isoformat()}
    slo.silenced_until, slo.silence_reason, slo.silenced_by = None, "", ""
    slo.save(update_fields=["silenced_until", "silence_reason", "silenced_by", "updated"])
    audit_record(
        action="slo.unsilenced", actor=actor, target=slo.topology, source_ip=source_ip, detail=detail
    )
    return slo


@transaction.atomic
def alert_acknowledge(*, alert: SloAlert, actor: Any = None, source_ip: str | None = None) -> SloAlert:
    """Someone is on it: recorded on the alert and shown; its notifications go on as before."""
    alert = SloAlert.objects.select_for_update().select_related("slo__topology").get(pk=alert.pk)
    if alert.state != AlertState.FIRING:
        raise Conflict("this alert has resolved; there is nothing to acknowledge", code="resolved")
    if alert.acknowledged is not None:
        raise Conflict(f"already acknowledged by {alert.acknowledged_by}", code="already_acknowledged")
    now = timezone.now()
    alert.acknowledged, alert.acknowledged_by = now, _actor_label(actor)
    alert.save(update_fields=["acknowledged", "acknowledged_by"])
    AlertEvent.objects.create(
        alert=alert, kind=AlertEventKind.ACKNOWLEDGED, at=now, actor=alert.acknowledged_by
    )
    audit_record(
        action="slo.alert_acknowledged", actor=actor, target=alert.slo.topology, source_ip=source_ip,
        detail={"alert": alert.pk, "slo": alert.slo_id, "severity": alert.severity},
    )  # fmt: skip
    return alert


def sli_counts(slo: Slo, requests: RequestWindow) -> tuple[float, float]:
    """(good, total) events of one interval for this SLO."""
    if slo.sli == Sli.SUCCESS:
        seen = requests.outcomes
        if seen is None:
            return 0.0, 0.0
        return seen.ok + seen.client, seen.answered  # a client's error (4xx) is the service working
    buckets = requests.ttft if slo.sli == Sli.TTFT else requests.itl
    return burn.good_at_most(buckets, (slo.threshold_ms or 0) / 1000.0)


def _minute(ts: datetime) -> datetime:
    return ts.replace(second=0, microsecond=0)


@transaction.atomic
def sli_record(*, topology_id: int, ts: float, requests: RequestWindow) -> int:
    """Add one telemetry interval's events to the minute of each enabled SLO of the topology; returns
    how many SLOs counted events."""
    minute = _minute(datetime.fromtimestamp(ts, tz=UTC))
    rows = []
    for slo in Slo.objects.filter(topology_id=topology_id, enabled=True):
        good, total = sli_counts(slo, requests)
        if total > 0:
            rows.append((slo.pk, min(good, total), total))
    if not rows:
        return 0
    table = connection.ops.quote_name(SliMinute._meta.db_table)
    when = connection.ops.adapt_datetimefield_value(minute)
    # the table name comes from the model; every value is a query parameter
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (slo_id, minute, good, total) VALUES (%s, %s, %s, %s) "  # noqa: S608
            "ON CONFLICT (slo_id, minute) DO UPDATE SET good = "
            f"{table}.good + EXCLUDED.good, total = {table}.total + EXCLUDED.total",
            [(slo_id, when, good, total) for slo_id, good, total in rows],
        )
    return len(rows)
