"""Rollback pages: choose, confirm (what it deploys and what differs from the running revision), keep."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.api.fields import ascii_int
from controlplane.client_ip import client_ip
from deployments.rollback_services import rollback_target, topology_keep_running, topology_rollback_start
from deployments.rollbacks import candidate_for, rollback_plan
from topologies import selectors as topology_selectors
from topologies.answers import answer
from topologies.models import Topology


def _back(topology_id: int) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("topologies:detail", args=[topology_id]) + "#deployments")


def _confirm_page(
    request: HttpRequest, topology: Topology, choice: str | None, *, error: str = "", status: int = 200
) -> HttpResponse:
    plan = rollback_plan(topology)
    context: dict[str, object] = {"topology": topology, "plan": plan, "error": error, "keep": False}
    if choice == "keep" or (choice is None and plan.keep_running and plan.default is None):
        context["keep"] = True
    else:
        number = ascii_int(choice) if choice else plan.default
        if number is None:
            context["error"] = error or "Choose one of the topology's revisions."
            status = 400
        else:
            revision = topology_selectors.revision_get(topology, number)
            if revision is None:
                context["error"] = f"{topology.name} has no revision {number}."
                status = 400
            elif plan.running == number:
                context["keep"] = plan.keep_running
                context["error"] = "" if plan.keep_running else f"Revision {number} is already running."
            else:
                context["revision"] = revision
                context["candidate"] = candidate_for(topology, revision, plan)
                context["running_revision"] = topology.deployed_revision
    return render(request, "deployments/rollback_confirm.html", context, status=status)


@require_GET
@role_required(Role.OPERATOR)
def rollback_confirm(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    return _confirm_page(request, topology, request.GET.get("revision") or None)


@require_POST
@role_required(Role.OPERATOR)
def topology_rollback(request: HttpRequest, pk: int) -> HttpResponse:
    """Deploys only what the confirmation page showed: a POST without ``confirm`` shows that page."""
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    choice = request.POST.get("revision") or None
    if request.POST.get("confirm") != "yes":
        return _confirm_page(request, topology, choice)
    try:
        revision = rollback_target(topology=topology, number=ascii_int(choice) if choice else None)
        deployment = topology_rollback_start(
            topology=topology,
            to_revision=revision,
            actor=request.user,
            source_ip=client_ip(request),
            allow_untested=request.POST.get("allow_untested") == "yes",
        )
    except DomainError as error:
        return _confirm_page(request, topology, choice, error=f"Not rolled back: {error.message}", status=400)
    answer(
        request,
        "deployments",
        messages.SUCCESS,
        f"{capfirst(deployment.describe())} queued; its progress shows below.",
    )
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def keep_running(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    try:
        kept = topology_keep_running(topology=topology, actor=request.user, source_ip=client_ip(request))
    except DomainError as error:
        return _confirm_page(request, topology, "keep", error=f"Not kept: {error.message}", status=400)
    number = kept.deployed_revision.number if kept.deployed_revision is not None else "–"
    answer(
        request,
        "deployments",
        messages.SUCCESS,
        f"Kept revision {number} running; it is the desired revision again and nothing was deployed.",
    )
    return _back(pk)
