"""Page actions from the topology detail page (plain forms: they work without JavaScript too)."""

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
from deployments import selectors, services
from deployments.forms import DeployPolicyForm, field_errors_text
from deployments.models import Deployment
from topologies import selectors as topology_selectors
from topologies.answers import answer, keep_input


def _back(topology_id: int) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("topologies:detail", args=[topology_id]) + "#deployments")


def _say(request: HttpRequest, level: int, text: str) -> None:
    """The answer shows inside the deployments panel, where the form was sent."""
    answer(request, "deployments", level, text)


def _started(request: HttpRequest, deployment: Deployment) -> None:
    _say(request, messages.SUCCESS, f"{capfirst(deployment.describe())} queued; its progress shows below.")


def _int(value: str | None) -> int | None:
    """A posted number in the digits 0-9 only ("١" is not quietly 1); None otherwise."""
    return ascii_int(value)


@require_POST
@role_required(Role.OPERATOR)
def topology_deploy(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    try:
        _started(
            request,
            services.deployment_start(
                topology=topology,
                actor=request.user,
                source_ip=client_ip(request),
                override_preflight=request.POST.get("override_preflight", "")[:300],
            ),
        )
    except DomainError as error:
        _say(request, messages.ERROR, f"Not deployed: {error.message}")
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def topology_scale(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    replicas = _int(request.POST.get("replicas"))
    role = request.POST.get("role", "")
    if replicas is None or replicas < 0 or role not in services.ROLES:
        keep_input(request, f"scale-{pk}", request.POST)
        _say(request, messages.ERROR, "Scale: choose prefill or decode and a replica count of 0 or more.")
        return _back(pk)
    try:
        _started(
            request,
            services.topology_scale_start(
                topology=topology,
                role=role,
                replicas=replicas,
                actor=request.user,
                source_ip=client_ip(request),
            ),
        )
    except DomainError as error:
        detail = "; ".join(f"{k}: {v[0]}" for k, v in error.fields.items()) if error.fields else ""
        keep_input(request, f"scale-{pk}", request.POST, error.fields)
        _say(request, messages.ERROR, f"Not scaled: {error.message}" + (f" ({detail})" if detail else ""))
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def topology_reapply(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    try:
        _started(
            request,
            services.topology_reapply_start(
                topology=topology, actor=request.user, source_ip=client_ip(request)
            ),
        )
    except DomainError as error:
        _say(request, messages.ERROR, f"Not re-applied: {error.message}")
    return _back(pk)


@require_POST
@role_required(Role.OPERATOR)
def deployment_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    deployment = get_object_or_404(selectors.deployment_list(), pk=pk)
    try:
        services.deployment_cancel(deployment=deployment, actor=request.user, source_ip=client_ip(request))
        _say(
            request,
            messages.INFO,
            f"Cancelling the {deployment.describe()}; it returns to the last good revision.",
        )
    except DomainError as error:
        _say(request, messages.ERROR, error.message)
    return (
        _back(deployment.topology_id) if deployment.topology_id else HttpResponseRedirect(reverse("overview"))
    )


@require_POST
@role_required(Role.OPERATOR)
def topology_deploy_policy(request: HttpRequest, pk: int) -> HttpResponse:
    """Set the ready timeout and automatic rollback (empty: the environment's defaults)."""
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    form = DeployPolicyForm(request.POST)
    if not form.is_valid():
        keep_input(request, f"deploy-policy-{pk}", request.POST, form.errors)
        _say(request, messages.ERROR, f"Deploy policy not saved: {field_errors_text(form.errors)}.")
        return _back(pk)
    try:
        policy = services.deploy_policy_set(
            topology=topology,
            ready_timeout_seconds=form.cleaned_data["ready_timeout_seconds"],
            auto_rollback=form.cleaned_data["auto_rollback"],
            keep_failed_first_deploy=form.cleaned_data["keep_failed_first_deploy"],
            actor=request.user,
            source_ip=client_ip(request),
        )
    except DomainError as error:
        detail = field_errors_text(error.fields) if error.fields else error.message
        keep_input(request, f"deploy-policy-{pk}", request.POST, error.fields)
        _say(request, messages.ERROR, f"Deploy policy not saved: {detail}.")
        return _back(pk)
    _say(
        request,
        messages.SUCCESS,
        f"Deploy policy saved: ready timeout {policy.effective_ready_timeout_seconds} s, "
        f"auto-rollback {'on' if policy.effective_auto_rollback else 'off'}, a failed first deploy is "
        f"{'kept' if policy.keep_failed_first_deploy else 'removed'}.",
    )
    return _back(pk)


@require_GET
@role_required(Role.VIEWER)
def topology_panel(request: HttpRequest, pk: int) -> HttpResponse:
    """The deployments panel alone, re-fetched by the page when a deployment finishes."""
    topology = get_object_or_404(topology_selectors.topology_list(), pk=pk)
    return render(
        request, "deployments/_topology_panel.html", selectors.topology_panel_context(topology, request)
    )
