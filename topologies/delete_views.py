"""Deleting a topology from the UI: a confirmation naming what goes, then the removal's live progress."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from accounts.permissions import role_required
from accounts.roles import Role
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from topologies import selectors
from topologies.render import object_key


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def topology_delete(request: HttpRequest, pk: int) -> HttpResponse:
    from deployments.services import topology_delete_start

    topology = get_object_or_404(selectors.topology_list(), pk=pk)
    objects = sorted(
        {object_key(obj) for revision in topology.revisions.all() for obj in revision.manifests or []}
    )
    context = {"title": f"Delete {topology.name}", "topology": topology, "objects": objects, "error": ""}
    if request.method == "POST":
        if request.POST.get("confirm_name", "").strip() != topology.name:
            context["error"] = f"type the topology's name, {topology.name}, to confirm"
            return render(request, "topologies/delete.html", context, status=400)
        try:
            job = topology_delete_start(topology=topology, actor=request.user, source_ip=client_ip(request))
        except DomainError as error:
            context["error"] = error.message
            return render(request, "topologies/delete.html", context, status=error.status_code)
        messages.info(request, f"Deleting {topology.name}: its cluster objects go first, then the topology.")
        return HttpResponseRedirect(reverse("topologies:removal", args=[job.pk]))
    return render(request, "topologies/delete.html", context)


@require_GET
@role_required(Role.VIEWER)
def topology_removal(request: HttpRequest, job: int) -> HttpResponse:
    from deployments.models import Deployment, Kind

    deployment = get_object_or_404(Deployment.objects.filter(kind=Kind.DELETE), pk=job)
    return render(
        request,
        "topologies/removal.html",
        {
            "title": f"Deleting {deployment.topology_name}",
            "deployment": deployment,
            "steps": deployment.steps.all(),
        },
    )
