"""The Adopt page: workloads on a cluster that Tandem does not manage, what each would become, adopt one;
and releasing an adopted topology from its page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

import kube
from accounts.permissions import role_required
from accounts.roles import Role
from clusters.models import Cluster
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from topologies import adoption, adoption_services, selectors
from topologies.spec import SpecError
from topologies.spec_values import ascii_int


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def topology_adopt(request: HttpRequest) -> HttpResponse:
    from clusters.selectors import cluster_connection

    clusters = list(Cluster.objects.order_by("name"))
    chosen = ascii_int(request.GET.get("cluster") or request.POST.get("cluster") or "")
    cluster = next((c for c in clusters if c.pk == chosen), clusters[0] if clusters else None)
    context: dict[str, Any] = {"title": "Adopt running workloads", "clusters": clusters, "cluster": cluster}
    if cluster is not None and request.method == "POST":
        try:
            topology = adoption_services.topology_adopt(
                cluster=cluster,
                kind=request.POST.get("kind", ""),
                namespace=request.POST.get("namespace", ""),
                name=request.POST.get("name", ""),
                actor=request.user,
                source_ip=client_ip(request),
            )
        except SpecError as error:
            context["error"] = "; ".join(f"{path}: {' '.join(m)}" for path, m in error.errors.items())
        except DomainError as error:
            context["error"] = error.message
        else:
            messages.success(
                request, f"Adopted {topology.name}: revision 1 is what runs; no pod was restarted."
            )
            return HttpResponseRedirect(reverse("topologies:detail", args=[topology.pk]))
    if cluster is not None:
        try:
            context["candidates"] = [c.as_dict() for c in adoption.adoptable(cluster_connection(cluster))]
        except kube.KubeError as error:
            context["error"] = f"cannot list the workloads on {cluster.name}: {error.message}"
    status = 400 if context.get("error") and request.method == "POST" else 200
    return render(request, "topologies/adopt.html", context, status=status)


@require_POST
@role_required(Role.OPERATOR)
def topology_release(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(selectors.topology_list(), pk=pk)
    try:
        released = adoption_services.topology_release(
            topology=topology, actor=request.user, source_ip=client_ip(request)
        )
    except DomainError as error:
        messages.error(request, f"Not released: {error.message}")
        return HttpResponseRedirect(reverse("topologies:detail", args=[pk]))
    messages.success(
        request, f"Released {topology.name}: {', '.join(released)} are the cluster's own again, unchanged."
    )
    return HttpResponseRedirect(reverse("topologies:list"))
