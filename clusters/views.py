"""Pages: clusters list, register, detail, remove. Each action calls one service."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from clusters import selectors, services
from clusters.checks import KTHENA_CRDS
from clusters.filtersets import ClusterFilterSet
from clusters.forms import ClusterDeleteForm, ClusterRegisterForm
from clusters.models import Cluster
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from kube.kubeconfig import KubeconfigError, list_contexts

#: Posted fields that hold credentials and are never rendered back into the page.
SECRET_FIELDS = ("kubeconfig", "token")


@login_required
def clusters_list(request: HttpRequest) -> HttpResponse:
    filterset = ClusterFilterSet(request.GET or None, queryset=selectors.cluster_list())
    clusters = filterset.qs if filterset.is_bound and filterset.is_valid() else selectors.cluster_list()
    return render(
        request,
        "clusters/list.html",
        {
            "title": "Clusters",
            "clusters": list(clusters),
            "filter": filterset,
            "filtered": bool(request.GET),
            "total": Cluster.objects.count(),
        },
    )


@never_cache  # the page handles credentials: no browser or proxy may keep a copy
@role_required(Role.ADMIN)
def cluster_register(request: HttpRequest) -> HttpResponse:
    form = ClusterRegisterForm(request.POST or None, request.FILES or None)
    contexts: list[str] = []
    if request.method == "POST" and form.is_valid():
        try:
            cluster = services.cluster_register(
                **form.service_kwargs(), actor=request.user, source_ip=client_ip(request)
            )
        except DomainError as exc:
            form.add_service_errors(exc.fields, exc.message)
        else:
            if cluster.health_state == "unreachable":
                messages.warning(
                    request, f"Saved {cluster.name}, but it is unreachable: {cluster.last_error}"
                )
            else:
                messages.success(
                    request, f"Registered {cluster.name} ({cluster.version}); full check queued."
                )
            warning = selectors.same_server_warning(cluster)
            if warning:
                messages.warning(request, warning)
            return redirect("clusters:detail", pk=cluster.pk)
    secrets_dropped = False
    if form.is_bound:
        text = getattr(form, "cleaned_data", {}).get("kubeconfig") or form.data.get("kubeconfig", "")
        if form.data.get("method") == "kubeconfig":
            try:
                contexts = list_contexts(text) if text else []
            except KubeconfigError:
                contexts = []
        # The page never carries a credential back: the kubeconfig (its token or client key) and the
        # token are dropped from the re-rendered form; the operator gives them again.
        secrets_dropped = bool(text or form.data.get("token"))
        form.data = _without_secrets(form.data)
    return render(
        request,
        "clusters/register.html",
        {
            "title": "Register a cluster",
            "form": form,
            "contexts": contexts,
            "secrets_dropped": secrets_dropped,
        },
    )


def _without_secrets(data: Any) -> dict[str, Any]:
    plain = data.dict() if hasattr(data, "dict") else dict(data)
    return {key: value for key, value in plain.items() if key not in SECRET_FIELDS}


@login_required
def cluster_detail(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(selectors.cluster_list(), pk=pk)
    return render(
        request,
        "clusters/detail.html",
        {
            "title": cluster.name,
            "cluster": cluster,
            "nodes": list(selectors.cluster_nodes(cluster)),
            "accelerators": selectors.cluster_accelerators(cluster),
            "history": selectors.cluster_health_history(cluster, limit=30),
            "topologies": selectors.cluster_topologies(cluster),
            "permissions": selectors.cluster_permission_rows(cluster),
            "missing_rules": selectors.cluster_missing_rules(cluster),
            "kthena_crds": [(name, name in (cluster.installed_crds or [])) for name in KTHENA_CRDS],
        },
    )


@require_POST
@role_required(Role.ADMIN)
def cluster_check(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    cluster = services.cluster_check(cluster_id=cluster.pk, actor=request.user, source_ip=client_ip(request))
    if cluster.health_state == "healthy":
        messages.success(request, f"{cluster.name} is healthy.")
    else:
        messages.warning(request, f"{cluster.name} is {cluster.health_state}: {cluster.last_error}")
    return redirect("clusters:detail", pk=cluster.pk)


@require_POST
@role_required(Role.OPERATOR)
def cluster_test_connection(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    result = services.cluster_test_connection(cluster=cluster)
    if result.ok:
        messages.success(
            request, f"Connected to {cluster.name}: {result.version} in {result.latency_ms:.0f} ms."
        )
    else:
        messages.error(request, f"Connection test failed: {result.message}")
    return redirect("clusters:detail", pk=cluster.pk)


@role_required(Role.ADMIN)
def cluster_delete(request: HttpRequest, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, pk=pk)
    topologies = selectors.cluster_topology_names(cluster)
    form = ClusterDeleteForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.cluster_delete(
                cluster=cluster,
                confirm=form.cleaned_data["confirm"],
                actor=request.user,
                source_ip=client_ip(request),
            )
        except DomainError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Removed cluster {cluster.name}.")
            return redirect("clusters:list")
    return render(
        request,
        "clusters/delete.html",
        {"title": f"Remove {cluster.name}", "cluster": cluster, "topologies": topologies, "form": form},
    )
