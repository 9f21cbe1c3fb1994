"""The Import page: paste or upload Kthena or Deployment YAML, see what it maps to, create the topology."""

from __future__ import annotations

from typing import Any

import yaml
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts.permissions import role_required
from accounts.roles import Role
from clusters.models import Cluster
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from topologies import services
from topologies.import_selectors import import_node_findings
from topologies.importing import import_manifests
from topologies.spec import SpecError
from topologies.spec_values import ascii_int

MAX_UPLOAD = 1_000_000


def _text(request: HttpRequest) -> tuple[str, str]:
    """The YAML to import (an uploaded file wins over the text area) and a problem with it, if any."""
    upload = request.FILES.get("file")
    if upload is None:
        return request.POST.get("yaml", ""), ""
    if upload.size is not None and upload.size > MAX_UPLOAD:
        return "", f"the file is {upload.size} bytes; import at most {MAX_UPLOAD} bytes at a time"
    try:
        return upload.read().decode("utf-8"), ""
    except UnicodeDecodeError:
        return "", "the file is not UTF-8 text; upload the YAML file itself"


def _overrides(text: str) -> tuple[dict[str, Any] | None, str]:
    if not text.strip():
        return None, ""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return None, "is not valid YAML; write spec fields, e.g. connector: {type: nixl}"
    if not isinstance(value, dict):
        return None, "must be spec fields (a mapping), e.g. connector: {type: nixl}"
    return value, ""


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def topology_import(request: HttpRequest) -> HttpResponse:
    clusters = list(Cluster.objects.order_by("name"))
    context: dict[str, Any] = {
        "title": "Import a topology",
        "clusters": clusters,
        "yaml": "",
        "overrides": "",
    }
    if request.method == "GET":
        context["cluster_id"] = str(clusters[0].pk) if clusters else ""
        return render(request, "topologies/import.html", context)
    text, problem = _text(request)
    overrides_text = request.POST.get("overrides", "")
    overrides, overrides_problem = _overrides(overrides_text)
    cluster = Cluster.objects.filter(pk=ascii_int(request.POST.get("cluster", "")) or 0).first()
    context.update(
        yaml=text,
        overrides=overrides_text,
        cluster_id=request.POST.get("cluster", ""),
        overrides_error=overrides_problem,
    )
    if problem or not text.strip():
        context["page_error"] = problem or "paste the YAML or choose a file to import"
        return render(request, "topologies/import.html", context, status=400)
    result = import_manifests(text, overrides=overrides)
    context["result"] = result
    context["report"] = result.report.as_dict()
    context["verdict"] = result.report.verdict()
    context["spec_yaml"] = yaml.safe_dump(result.spec, sort_keys=False, width=4096) if result.spec else ""
    if request.POST.get("action") != "create" or overrides_problem:
        if result.ok and cluster is not None:  # resource names checked against the chosen cluster's nodes
            context["node_findings"] = import_node_findings(cluster=cluster, spec=result.spec)
        return render(request, "topologies/import.html", context)
    if cluster is None:
        context["page_error"] = "choose the cluster to run on (register one on the Clusters page first)"
        return render(request, "topologies/import.html", context, status=400)
    try:
        topology, _ = services.topology_import(
            cluster=cluster, text=text, overrides=overrides, actor=request.user, source_ip=client_ip(request)
        )
    except SpecError as error:
        context["result"].errors = {k if k == "yaml" else f"spec.{k}": v for k, v in error.errors.items()}
        return render(request, "topologies/import.html", context, status=400)
    except DomainError as error:
        context["page_error"] = error.message
        return render(request, "topologies/import.html", context, status=400)
    messages.success(request, f"Imported {topology.name} as revision 1. Deploy it when preflight is clean.")
    return HttpResponseRedirect(reverse("topologies:detail", args=[topology.pk]))
