"""Gateway pages: the topology panel (serving endpoint, fallback, breaker, Verify) and its forms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from gateway import selectors, services
from gateway.forms import RouteForm
from gateway.probes import KINDS
from topologies import selectors as topology_selectors
from topologies.answers import answer, back_to, keep_input


def _back(pk: int, anchor: str = "answer-gateway") -> HttpResponseRedirect:
    return back_to(pk, anchor)


# The settings form's fields as its labels name them.
_LABELS = {
    "endpoint_url": "serving endpoint",
    "aliases": "other model names",
    "fallback_base_url": "fallback base URL",
    "fallback_model": "fallback model",
    "fallback_api_key": "fallback key",
    "fallback_on_429": "fall back on 429",
}


def _fields_text(errors: Mapping[str, Iterable[Any]]) -> str:
    return "; ".join(
        f"{_LABELS.get(name, name.replace('_', ' '))}: {' '.join(str(m) for m in msgs)}"
        for name, msgs in errors.items()
    )


def _refused(
    request: HttpRequest, pk: int, detail: str, errors: Mapping[str, Iterable[Any]]
) -> HttpResponseRedirect:
    """The error inside the settings form, which opens again holding what was typed (the key excepted)."""
    keep_input(request, f"gateway-route-{pk}", request.POST, errors, secret=("fallback_api_key",))
    if request.POST.get("fallback_api_key"):
        request.session[f"kept-input:gateway-route-{pk}"]["values"]["key_typed"] = "1"
    answer(request, "gateway", messages.ERROR, f"Gateway settings not saved: {detail}.")
    return _back(pk)


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
        answer(request, "gateway-verify", messages.ERROR, f"Verification not started: {error.message}")
        return _back(pk, "answer-gateway-verify")
    return _back(pk, "gateway-verify")  # the run shows there as it goes, under the Verify button


@require_POST
@role_required(Role.OPERATOR)
def topology_route(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    form = RouteForm(request.POST)
    if not form.is_valid():
        return _refused(request, pk, _fields_text(form.errors), form.errors)
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
        detail = _fields_text(error.fields) if error.fields else error.message
        return _refused(request, pk, detail, error.fields or {})
    answer(
        request, "gateway", messages.SUCCESS, "Gateway settings saved; the gateway uses them within a second."
    )
    return _back(pk)


@require_GET
@role_required(Role.VIEWER)
def topology_panel(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    context = {"topology": topology, **selectors.topology_gateway_context(topology, request)}
    return render(request, "gateway/_topology_panel.html", context)
