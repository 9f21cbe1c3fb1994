"""Gateway pages: the topology panel (serving endpoint, fallback, breaker, Verify) and its forms."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from deployments.forms import field_errors_text
from gateway import selectors, services
from gateway.forms import RouteForm
from gateway.probes import KINDS
from topologies import selectors as topology_selectors


def _back(pk: int) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("topologies:detail", args=[pk]) + "#gateway")


@require_POST
@role_required(Role.OPERATOR)
def topology_verify(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    kinds = [k for k in request.POST.getlist("kinds") if k in KINDS] or list(KINDS)
    try:
        services.probe_run_start(
            topology=topology, kinds=kinds, params={}, actor=request.user, source_ip=client_ip(request)
        )
    except DomainError as error:
        messages.error(request, f"Verification not started: {error.message}")
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def topology_route(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    form = RouteForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Gateway settings not saved: {field_errors_text(form.errors)}.")
        return _back(pk)
    changes = dict(form.cleaned_data)
    if not changes.get("fallback_api_key"):
        changes.pop("fallback_api_key", None)  # empty: keep the stored key
    if form.cleaned_data.get("clear_fallback_key"):
        changes["fallback_api_key"] = ""
    changes.pop("clear_fallback_key", None)
    try:
        services.route_update(
            topology=topology, changes=changes, actor=request.user, source_ip=client_ip(request)
        )
    except DomainError as error:
        detail = field_errors_text(error.fields) if error.fields else error.message
        messages.error(request, f"Gateway settings not saved: {detail}.")
        return _back(pk)
    messages.success(request, "Gateway settings saved; the gateway uses them within a second.")
    return _back(pk)


@require_GET
@role_required(Role.VIEWER)
def topology_panel(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    context = {"topology": topology, **selectors.topology_gateway_context(topology, request)}
    return render(request, "gateway/_topology_panel.html", context)
