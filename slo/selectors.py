"""SLO reads: the topology panel's and the Overview's context, and the API's querysets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils import timezone

from slo import burn
from slo.models import AlertState, Delivery, DeliveryAttempt, NotificationTarget, Slo, SloAlert
from slo.payloads import mask_url

RECENT = 10


def slo_list(*, topology_id: int | None = None) -> QuerySet[Slo]:
    rows = Slo.objects.select_related("topology")
    return rows.filter(topology_id=topology_id) if topology_id is not None else rows


def alert_list() -> QuerySet[SloAlert]:
    return SloAlert.objects.select_related("slo__topology").prefetch_related("events")


def target_list() -> QuerySet[NotificationTarget]:
    return NotificationTarget.objects.select_related("topology")


def delivery_list() -> QuerySet[Delivery]:
    attempts = Prefetch("attempt_rows", queryset=DeliveryAttempt.objects.order_by("number"))
    return Delivery.objects.select_related("target", "alert__slo").prefetch_related(attempts)


def slo_view(slo: Slo) -> dict[str, Any]:
    """What a page shows of one SLO: its words, budget bar, burn rates and silence."""
    status = slo.status or {}
    remaining = status.get("budget_remaining")
    now = timezone.now()
    silenced = slo.silenced_until is not None and slo.silenced_until > now
    rules = status.get("rules") or [
        {
            "name": r.name,
            "severity": r.severity,
            "threshold": r.burn,
            "long": None,
            "short": None,
            "holds": False,
        }
        for r in burn.rules_for(slo.window_days)
    ]
    return {
        "slo": slo,
        "text": slo.describe(),
        "objective_pct": f"{slo.objective * 100:.6g}",
        "remaining": remaining,
        "remaining_pct": None if remaining is None else remaining * 100,
        "spent_times": None if remaining is None or remaining >= 0 else 1.0 - remaining,
        "bar_pct": 0 if remaining is None else max(0.0, min(100.0, remaining * 100)),
        "colour": status.get("colour", "unknown"),
        "compliance_pct": None if status.get("compliance") is None else status["compliance"] * 100,
        "total": status.get("total", 0),
        "rules": rules,
        "silenced": silenced,
    }


def _can_operate(request: Any) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.has_role("operator"))


def topology_panel_context(topology: Any, request: Any = None) -> dict[str, Any]:
    slos = list(slo_list(topology_id=topology.pk))
    alerts = list(alert_list().filter(slo__topology=topology)[:RECENT])
    targets = list(target_list().filter(Q(topology__isnull=True) | Q(topology=topology)))
    deliveries = list(
        delivery_list().filter(Q(alert__slo__topology=topology) | Q(alert__isnull=True, target__in=targets))[
            :RECENT
        ]
    )
    return {
        "slos": [slo_view(slo) for slo in slos],
        "firing": sorted(
            (a for a in alerts if a.state == AlertState.FIRING), key=lambda a: a.severity != "page"
        ),
        "alerts": alerts,
        "targets": [{"target": t, "url": mask_url(t.url)} for t in targets],
        "deliveries": deliveries,
        "missing_defaults": {"ttft", "tbt", "success"} - {s.sli for s in slos},
        "can_operate": _can_operate(request),
        "now": timezone.now(),
    }


def overview_rows() -> list[dict[str, Any]]:
    """Per topology with SLOs: each SLO's budget and the alerts firing, worst first."""
    slos = list(slo_list().filter(enabled=True))
    firing: dict[int, list[SloAlert]] = {}
    for alert in alert_list().filter(state=AlertState.FIRING, slo__in=slos).order_by("severity", "-started"):
        firing.setdefault(alert.slo_id, []).append(alert)
    since = timezone.now() - timedelta(hours=24)
    recent: dict[int, dict[str, int]] = {}
    sent = (
        Delivery.objects.filter(created__gte=since, alert__slo__in=slos)
        .values("alert__slo__topology_id", "state")
        .annotate(n=Count("id"))
    )
    kinds = {
        "delivered": "delivered",
        "failed": "failed",
        "pending": "waiting",
        "sending": "waiting",
        "retrying": "waiting",
    }
    for entry in sent:
        counts = recent.setdefault(entry["alert__slo__topology_id"], {})
        kind = kinds[entry["state"]]
        counts[kind] = counts.get(kind, 0) + entry["n"]
    rows: dict[int, dict[str, Any]] = {}
    for slo in slos:
        row = rows.setdefault(
            slo.topology_id,
            {
                "topology_id": slo.topology_id,
                "name": slo.topology.name,
                "slos": [],
                "alerts": [],
                "deliveries": recent.get(slo.topology_id, {}),
            },
        )
        row["slos"].append(slo_view(slo))
        row["alerts"].extend(firing.get(slo.pk, []))
    ordered = sorted(
        rows.values(),
        key=lambda r: (
            -len(r["alerts"]),
            min((s["remaining"] if s["remaining"] is not None else 2.0) for s in r["slos"]),
            r["name"],
        ),
    )
    return ordered
