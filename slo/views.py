"""SLO forms on the topology page: add the usual SLOs, change one, acknowledge, silence, targets, test.
Each answers inside the SLO panel (``topologies.answers``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from slo import delivery, services
from slo.models import NotificationTarget, Slo, SloAlert
from topologies.answers import answer, back_to
from topologies.models import Topology

PANEL = "slo"


def _do(request: HttpRequest, pk: int, done: str, refused: str, work: Callable[[], Any]) -> HttpResponse:
    try:
        work()
    except DomainError as error:
        answer(request, PANEL, messages.ERROR, f"{refused}: {error.message}")
    else:
        answer(request, PANEL, messages.SUCCESS, done)
    return back_to(pk, f"answer-{PANEL}")


def _who(request: HttpRequest) -> dict[str, Any]:
    return {"actor": request.user, "source_ip": client_ip(request)}


def _number(request: HttpRequest, name: str, label: str) -> float | None:
    raw = request.POST.get(name, "").strip()
    if not raw:
        return None
    if not raw.replace(".", "", 1).isdigit() or not raw.isascii():
        raise DomainError(
            f"{label}: write a number with the digits 0-9 (for example 99.5)", fields={name: ["not a number"]}
        )
    return float(raw)


@require_POST
@role_required(Role.OPERATOR)
def slo_defaults(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(Topology, pk=pk)

    def work() -> None:
        made = services.slo_create_defaults(topology=topology, **_who(request))
        if not made:
            raise DomainError("every usual SLO is defined already, or the topology sets no TTFT/TBT target")

    return _do(
        request, pk, "SLOs added; their budgets fill in as telemetry counts requests", "No SLO added", work
    )


@require_POST
@role_required(Role.OPERATOR)
def slo_edit(request: HttpRequest, slo_id: int) -> HttpResponse:
    slo = get_object_or_404(Slo.objects.select_related("topology"), pk=slo_id)

    def work() -> None:
        changes: dict[str, Any] = {}
        objective = _number(request, "objective_percent", "objective")
        if objective is not None:
            changes["objective"] = objective / 100.0
        threshold = _number(request, "threshold_ms", "threshold")
        if threshold is not None:
            changes["threshold_ms"] = int(threshold)
        window = _number(request, "window_days", "window")
        if window is not None:
            changes["window_days"] = int(window)
        services.slo_update(slo=slo, changes=changes, **_who(request))

    return _do(request, slo.topology_id, f"{slo.get_sli_display()} SLO saved", "SLO not saved", work)


@require_POST
@role_required(Role.OPERATOR)
def alert_acknowledge(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = get_object_or_404(SloAlert.objects.select_related("slo"), pk=alert_id)
    return _do(
        request,
        alert.slo.topology_id,
        "Alert acknowledged",
        "Not acknowledged",
        lambda: services.alert_acknowledge(alert=alert, **_who(request)),
    )


@require_POST
@role_required(Role.OPERATOR)
def slo_silence(request: HttpRequest, slo_id: int) -> HttpResponse:
    slo = get_object_or_404(Slo.objects.select_related("topology"), pk=slo_id)

    def work() -> None:
        hours = _number(request, "hours", "silence for")
        if hours is None or hours <= 0:
            raise DomainError(
                "silence for: give a number of hours (for example 2)", fields={"hours": ["required"]}
            )
        until = timezone.now() + timedelta(hours=hours)
        services.slo_silence(slo=slo, until=until, reason=request.POST.get("reason", ""), **_who(request))

    return _do(request, slo.topology_id, f"{slo.get_sli_display()} SLO silenced", "Not silenced", work)


@require_POST
@role_required(Role.OPERATOR)
def slo_unsilence(request: HttpRequest, slo_id: int) -> HttpResponse:
    slo = get_object_or_404(Slo.objects.select_related("topology"), pk=slo_id)
    return _do(
        request,
        slo.topology_id,
        f"{slo.get_sli_display()} SLO notifications on again",
        "Silence not ended",
        lambda: services.slo_unsilence(slo=slo, **_who(request)),
    )


@require_POST
@role_required(Role.OPERATOR)
def target_add(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(Topology, pk=pk)
    scope = topology if request.POST.get("scope") != "all" else None
    return _do(
        request,
        pk,
        "Notification target added; send a test to check it",
        "Target not added",
        lambda: delivery.target_create(
            name=request.POST.get("name", ""),
            url=request.POST.get("url", ""),
            format=request.POST.get("format", "json"),
            topology=scope,
            **_who(request),
        ),
    )


@require_POST
@role_required(Role.OPERATOR)
def target_test(request: HttpRequest, pk: int, target_id: int) -> HttpResponse:
    target = get_object_or_404(NotificationTarget, pk=target_id)
    return _do(
        request,
        pk,
        f"Test notification to {target.name} queued; its delivery shows below",
        "Test not sent",
        lambda: delivery.target_test(target=target, **_who(request)),
    )
