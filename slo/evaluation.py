"""Burn-rate evaluation (a service): sum each SLO's events over its windows, keep the budget and burn
rates on the SLO for the pages, fire and resolve alerts (each transition recorded and audited), and make
the notifications. The math is ``slo.burn``'s."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone

from audit.services import audit_record
from slo import burn
from slo.delivery import notify_transition
from slo.models import AlertEvent, AlertEventKind, AlertState, SliMinute, Slo, SloAlert

PRUNE_MARGIN = timedelta(days=1)


def _span_key(seconds: float) -> str:
    return burn._span(seconds).replace(" ", "")


def window_sums(slo: Slo, spans: tuple[float, ...], now: datetime) -> dict[float, tuple[float, float]]:
    """(good, total) over the last ``span`` seconds for each span, to the minute, in one query."""
    floor = now.replace(second=0, microsecond=0)
    aggregates: dict[str, Any] = {}
    for index, span in enumerate(spans):
        since = (now - timedelta(seconds=span)).replace(second=0, microsecond=0)
        aggregates[f"g{index}"] = Sum("good", filter=Q(minute__gte=since))
        aggregates[f"t{index}"] = Sum("total", filter=Q(minute__gte=since))
    oldest = now - timedelta(seconds=max(spans))
    row = SliMinute.objects.filter(
        slo=slo, minute__gte=oldest.replace(second=0, microsecond=0), minute__lte=floor
    )
    found = row.aggregate(**aggregates)
    return {span: (found[f"g{i}"] or 0.0, found[f"t{i}"] or 0.0) for i, span in enumerate(spans)}


LONG_SPAN = 3600.0  # windows longer than this are re-summed at most once per LONG_REUSE
LONG_REUSE = timedelta(seconds=60)


def _sums(slo: Slo, spans: tuple[float, ...], now: datetime) -> tuple[dict[float, tuple[float, float]], str]:
    """Every span's sums; those over an hour come from an evaluation under a minute old (a minute's
    events are a small share of 6 hours' or 28 days'; summing 28 days of minutes every interval is
    where evaluation would spend nearly all its time), and the last hour's are summed every time."""
    kept = (slo.status or {}).get("long_sums") or {}
    at = (slo.status or {}).get("long_sums_at")
    fresh = at is not None and timedelta(0) <= now - datetime.fromisoformat(at) < LONG_REUSE
    long_spans = tuple(span for span in spans if span > LONG_SPAN)
    reuse = fresh and all(_span_key(span) in kept for span in long_spans)
    wanted = tuple(span for span in spans if span <= LONG_SPAN) if reuse else spans
    sums = window_sums(slo, wanted, now)
    if not reuse:
        return sums, now.isoformat()
    sums.update(
        {span: (float(kept[_span_key(span)][0]), float(kept[_span_key(span)][1])) for span in long_spans}
    )
    return sums, str(at)


def slo_status(slo: Slo, now: datetime) -> tuple[dict[str, Any], dict[str, burn.Rule | None]]:
    """The SLO's budget and burn rates now, and per severity the rule that holds (or None)."""
    rules = burn.rules_for(slo.window_days)
    compliance = slo.window_days * 86400.0
    spans = (*burn.windows_of(rules), compliance)
    sums, sums_at = _sums(slo, spans, now)
    rates = {span: burn.burn_rate(good, total, slo.objective) for span, (good, total) in sums.items()}
    good, total = sums[compliance]
    remaining = burn.budget_remaining(good, total, slo.objective)
    holds = burn.severity_holds(rules, rates)
    status = {
        "good": good,
        "total": total,
        "budget_remaining": remaining,
        "colour": burn.budget_colour(remaining),
        "compliance": (good / total) if total > 0 else None,
        "burn": {_span_key(span): rates[span] for span in spans if span != compliance},
        "rules": [
            {
                "name": rule.name,
                "severity": rule.severity,
                "threshold": round(rule.burn, 4),
                "long": rates[rule.long_s],
                "short": rates[rule.short_s],
                "holds": burn.rule_holds(rule, rates),
            }
            for rule in rules
        ],
        "evaluated": now.isoformat(),
        "long_sums": {_span_key(span): list(sums[span]) for span in spans if span > LONG_SPAN},
        "long_sums_at": sums_at,
    }
    return status, {str(key): rule for key, rule in holds.items()}


def slo_evaluate(*, topology_id: int, now: datetime | None = None) -> list[str]:
    """Evaluate every enabled SLO of the topology; returns the transitions (``"ttft page fired"``)."""
    now = now or timezone.now()
    changes: list[str] = []
    for slo_id in Slo.objects.filter(topology_id=topology_id, enabled=True).values_list("pk", flat=True):
        changes.extend(_evaluate_one(slo_id, now))
    return changes


@transaction.atomic
def _evaluate_one(slo_id: int, now: datetime) -> list[str]:
    slo = Slo.objects.select_for_update().select_related("topology").filter(pk=slo_id).first()
    if slo is None:
        return []
    status, holds = slo_status(slo, now)
    slo.status, slo.evaluated = status, now
    slo.save(update_fields=["status", "evaluated"])
    SliMinute.objects.filter(
        slo=slo, minute__lt=now - timedelta(days=slo.window_days) - PRUNE_MARGIN
    ).delete()
    firing = {a.severity: a for a in SloAlert.objects.filter(slo=slo, state=AlertState.FIRING)}
    rates_by_name = {r["name"]: r for r in status["rules"]}
    changes = []
    for severity in ("page", "ticket"):
        rule = holds.get(severity)
        alert = firing.get(severity)
        decision = burn.decide(firing=alert is not None, holds=rule is not None)
        if decision == "fire" and rule is not None:
            _fire(slo, rule, rates_by_name[rule.name], status, now)
            changes.append(f"{slo.sli} {severity} fired")
        elif decision == "resolve" and alert is not None:
            _resolve(slo, alert, status, now)
            changes.append(f"{slo.sli} {severity} resolved")
        elif alert is not None:
            long_now = next((r["long"] for r in status["rules"] if r["name"] == alert.rule), None)
            if long_now is not None and long_now > alert.peak_burn:
                SloAlert.objects.filter(pk=alert.pk).update(peak_burn=long_now)
    return changes


def _fire(slo: Slo, rule: burn.Rule, rates: dict[str, Any], status: dict[str, Any], now: datetime) -> None:
    alert = SloAlert.objects.create(
        slo=slo,
        severity=rule.severity,
        rule=rule.name,
        burn_threshold=rule.burn,
        long_burn=rates["long"],
        short_burn=rates["short"],
        peak_burn=rates["long"],
        started=now,
    )
    detail = {
        "alert": alert.pk,
        "slo": slo.pk,
        "sli": slo.sli,
        "severity": rule.severity,
        "rule": rule.name,
        "burn_threshold": round(rule.burn, 4),
        "long_burn": rates["long"],
        "short_burn": rates["short"],
        "budget_remaining": status["budget_remaining"],
    }
    AlertEvent.objects.create(alert=alert, kind=AlertEventKind.FIRED, at=now, detail=detail)
    audit_record(action="slo.alert_fired", target=slo.topology, detail=detail)
    notify_transition(alert=alert, status=status, now=now)


def resolve_firing(*, slo: Slo, why: str) -> int:
    """Resolve the SLO's firing alerts when it stops being evaluated (disabled), notifying as usual."""
    now = timezone.now()
    alerts = list(SloAlert.objects.select_for_update().filter(slo=slo, state=AlertState.FIRING))
    for alert in alerts:
        _resolve(slo, alert, {**(slo.status or {}), "why": why}, now)
    return len(alerts)


def _resolve(slo: Slo, alert: SloAlert, status: dict[str, Any], now: datetime) -> None:
    alert.state, alert.ended = AlertState.RESOLVED, now
    alert.save(update_fields=["state", "ended"])
    current: dict[str, Any] = next((r for r in status["rules"] if r["name"] == alert.rule), {})
    detail = {
        "alert": alert.pk,
        "slo": slo.pk,
        "sli": slo.sli,
        "severity": alert.severity,
        "rule": alert.rule,
        "long_burn": current.get("long"),
        "short_burn": current.get("short"),
        "budget_remaining": status.get("budget_remaining"),
        **({"why": status["why"]} if "why" in status else {}),
    }
    AlertEvent.objects.create(alert=alert, kind=AlertEventKind.RESOLVED, at=now, detail=detail)
    audit_record(action="slo.alert_resolved", target=slo.topology, detail=detail)
    notify_transition(alert=alert, status=status, now=now)
