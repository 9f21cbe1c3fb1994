"""Pages: the rebalancing panel's actions (plain forms), its partial for live refresh, the what-if page."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from rebalancing import selectors, services, whatif
from topologies import selectors as topology_selectors


def _back(pk: int) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("topologies:detail", args=[pk]) + "#rebalancing")


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


@require_POST
@role_required(Role.OPERATOR)
def planner_set(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    config = selectors.planner_config(topology)
    try:
        services.planner_config_set(
            topology=topology,
            mode=request.POST.get("mode", ""),
            params=config.params,
            min_ratio=_float(request.POST.get("min_ratio")),
            max_ratio=_float(request.POST.get("max_ratio")),
            actor=request.user,
            source_ip=client_ip(request),
        )
        messages.success(request, f"Planner set to {request.POST.get('mode')}.")
    except DomainError as error:
        messages.error(request, f"Planner not changed: {error.message}")
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def ratio_set(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    prefill, decode = _int(request.POST.get("prefill")), _int(request.POST.get("decode"))
    if prefill is None or decode is None:
        messages.error(request, "Set the ratio: give whole numbers of prefill and decode replicas.")
        return _back(pk)
    try:
        rebalance = services.rebalance_ratio_start(
            topology=topology,
            prefill=prefill,
            decode=decode,
            actor=request.user,
            source_ip=client_ip(request),
        )
        messages.success(request, f"Rebalance #{rebalance.pk} to {prefill}P/{decode}D started.")
    except DomainError as error:
        messages.error(request, f"Ratio not changed: {error.message}")
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def switch_role(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    try:
        rebalance = services.rebalance_switch_start(
            topology=topology,
            instance=request.POST.get("instance", "").strip(),
            target_role=request.POST.get("target_role", ""),
            actor=request.user,
            source_ip=client_ip(request),
        )
        messages.success(request, f"Switch #{rebalance.pk} started.")
    except DomainError as error:
        messages.error(request, f"Not switched: {error.message}")
    return _back(pk)


@require_GET
@role_required(Role.VIEWER)
def panel(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    context = {"topology": topology, **selectors.topology_panel_context(topology, request)}
    return render(request, "rebalancing/_topology_panel.html", context)


@require_http_methods(["GET", "POST"])
@role_required(Role.VIEWER)
def whatif_page(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    window = _int(request.POST.get("window_seconds") or request.GET.get("window_seconds")) or 3600
    result = None
    error = ""
    if request.method == "POST":
        try:
            result = whatif.topology_whatif(topology=topology, window_seconds=max(60, min(window, 86400)))
        except DomainError as exc:
            error = exc.message
    return render(
        request,
        "rebalancing/whatif.html",
        {
            "title": f"What-if: {topology.name}",
            "topology": topology,
            "window": window,
            "result": result,
            "error": error,
        },
    )
