"""Pages: the rebalancing panel's actions (plain forms) and its partial for live refresh (the what-if page is
whatif.views)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from rebalancing import selectors, services
from rebalancing.models import PlannerMode
from topologies import selectors as topology_selectors
from topologies.answers import answer, back_to, keep_input

# Field names in the words the panel's labels use (the API's names stay minRatio/min_ratio).
_WORDS = {
    "minRatio": "the lowest ratio",
    "maxRatio": "the highest ratio",
    "min_ratio": "the lowest ratio",
    "max_ratio": "the highest ratio",
}


def _in_words(text: str) -> str:
    for name, words in _WORDS.items():
        text = text.replace(name, words)
    return text


def _refused(request: HttpRequest, pk: int, form: str, what: str, error: DomainError) -> HttpResponseRedirect:
    """The error in the panel, in words, and the form as it was sent."""
    fields = {name: [_in_words(str(m)) for m in msgs] for name, msgs in (error.fields or {}).items()}
    detail = "; ".join(" ".join(msgs) for msgs in fields.values())
    text = f"{what}: {_in_words(error.message)}" + (f"; {detail}" if detail else "")
    keep_input(request, f"rebalancing-{form}-{pk}", request.POST, fields)
    answer(request, "rebalancing", messages.ERROR, text + ".")
    return _back(pk)


def _back(pk: int) -> HttpResponseRedirect:
    return back_to(pk, "answer-rebalancing")


def panel_context(topology: Any, request: Any = None) -> dict[str, Any]:
    """The panel's context, with the running pods a person may switch (none when the cluster cannot be
    asked: the form then says so instead of taking a typed name)."""
    context = selectors.topology_panel_context(topology, request)
    instances: list[dict[str, str]] = []
    if context["rebalancing"]["can_write"] and topology.deployed_revision_id is not None:
        from rebalancing.switching import role_pods, serving_roles

        try:
            pods = serving_roles(role_pods(topology))
        except DomainError:
            pods = {}
        instances = [{"name": name, "serving": serving} for name, (serving, _) in sorted(pods.items())]
    context["rebalancing"]["instances"] = instances
    return context


def rebalance_pod(request: HttpRequest) -> str:
    return request.POST.get("instance", "").strip() or "the pod"


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
        mode = dict(PlannerMode.choices).get(request.POST.get("mode", ""), request.POST.get("mode"))
        answer(request, "rebalancing", messages.SUCCESS, f"Planner saved: {mode}.")
    except DomainError as error:
        return _refused(request, pk, "planner", "Planner not changed", error)
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def planner_handoff(request: HttpRequest, pk: int) -> HttpResponse:
    """Hand the P:D bounds to the Kthena AutoscalingPolicy that scales the roles; Tandem stays advisory."""
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    policy = request.POST.get("policy", "").strip()
    try:
        services.planner_handoff(
            topology=topology, policy=policy, actor=request.user, source_ip=client_ip(request)
        )
    except DomainError as error:
        return _refused(request, pk, "planner", "Not handed over", error)
    answer(
        request,
        "rebalancing",
        messages.SUCCESS,
        f"Kthena's AutoscalingPolicy {policy} now keeps the P:D ratio within the planner's bounds; the "
        "planner is advisory.",
    )
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def ratio_set(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    prefill, decode = _int(request.POST.get("prefill")), _int(request.POST.get("decode"))
    if prefill is None or decode is None:
        missing = {
            k: ["give a whole number"] for k, v in (("prefill", prefill), ("decode", decode)) if v is None
        }
        keep_input(request, f"rebalancing-ratio-{pk}", request.POST, missing)
        answer(
            request,
            "rebalancing",
            messages.ERROR,
            "Ratio not changed: give whole numbers of prefill and decode replicas.",
        )
        return _back(pk)
    try:
        rebalance = services.rebalance_ratio_start(
            topology=topology,
            prefill=prefill,
            decode=decode,
            actor=request.user,
            source_ip=client_ip(request),
        )
        answer(
            request,
            "rebalancing",
            messages.SUCCESS,
            f"Rebalance #{rebalance.pk} to {prefill} prefill / {decode} decode started (steps above).",
        )
    except DomainError as error:
        return _refused(request, pk, "ratio", "Ratio not changed", error)
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
        answer(
            request,
            "rebalancing",
            messages.SUCCESS,
            f"Switch #{rebalance.pk} started: {rebalance_pod(request)} to {request.POST.get('target_role')}.",
        )
    except DomainError as error:
        return _refused(request, pk, "switch", "Not switched", error)
    return _back(pk)


@require_GET
@role_required(Role.VIEWER)
def panel(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    context = {"topology": topology, **panel_context(topology, request)}
    return render(request, "rebalancing/_topology_panel.html", context)
