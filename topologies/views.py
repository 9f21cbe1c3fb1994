"""Topology pages: list, detail (summary, revisions, diff, other apps' panels), editor with live preflight."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.permissions import role_required
from accounts.roles import Role
from clusters.models import Cluster
from controlplane.api.errors import DomainError
from controlplane.client_ip import client_ip
from topologies import panels, selectors, services
from topologies.filtersets import TopologyFilterSet
from topologies.forms import FIELDS, SECTIONS, parse_values, spec_to_values
from topologies.models import Topology
from topologies.presets import PRESETS
from topologies.render import to_yaml
from topologies.spec import SpecError
from topologies.spec_values import ascii_int


@require_GET
@role_required(Role.VIEWER)
def topologies_list(request: HttpRequest) -> HttpResponse:
    filterset = TopologyFilterSet(request.GET or None, queryset=selectors.topology_list())
    topologies = filterset.qs if filterset.is_bound and filterset.is_valid() else selectors.topology_list()
    return render(
        request,
        "topologies/list.html",
        {
            "title": "Topologies",
            "filter": filterset,
            "topologies": topologies,
            "filtered": bool(request.GET),
            "has_clusters": Cluster.objects.exists(),
        },
    )


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """(css class, line) for a unified diff, for colouring."""
    out: list[tuple[str, str]] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "diff-file"
        elif line.startswith("@@"):
            kind = "diff-hunk"
        elif line.startswith("+"):
            kind = "diff-add"
        elif line.startswith("-"):
            kind = "diff-del"
        else:
            kind = "diff-ctx"
        out.append((kind, line))
    return out


def _int(value: str | None) -> int | None:
    """An ASCII decimal from a query or form value; None otherwise ("١" is not quietly 1)."""
    return ascii_int(value) if value not in (None, "") else None


# The topology page's section bar: panel name → (anchor, label); the summary, revisions and manifests
# are the page's own sections.
_SECTIONS = {
    "deployments": ("deployments", "Deployments"),
    "telemetry": ("telemetry-live", "Live"),
    "rebalancing": ("rebalancing", "Rebalancing"),
    "gateway": ("gateway", "Gateway"),
    "slo": ("slo", "SLOs"),
    "hit-rate": ("hit-rate", "Hit rate"),
}


@require_GET
@role_required(Role.VIEWER)
def topology_detail(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(selectors.topology_list(), pk=pk)
    revisions = list(selectors.topology_revisions(topology))
    numbers = [r.number for r in revisions]
    newest = numbers[0] if numbers else None
    to_n = _int(request.GET.get("to")) or newest
    from_n = _int(request.GET.get("from")) or (to_n - 1 if to_n and to_n > 1 else None)
    diff: list[tuple[str, str]] | None = None
    diff_error = ""
    if from_n and to_n and ("from" in request.GET or len(numbers) > 1):
        a = next((r for r in revisions if r.number == from_n), None)
        b = next((r for r in revisions if r.number == to_n), None)
        if a is None or b is None:
            diff_error = f"revision {from_n if a is None else to_n} does not exist; pick one from the list"
        else:
            diff = diff_lines(selectors.revision_diff(a, b))
    current = topology.current_revision
    from deployments.rollbacks import failed_revisions, revision_rows
    from deployments.rollout import ever_ran, topology_rollout

    panels.register_known_panels()
    roles = topology.spec.get("roles", {})
    rollout = topology_rollout(topology)
    rows = revision_rows(revisions, keep={rollout["desired"], rollout["running"]})
    rendered = panels.render_panels(topology, request)
    return render(
        request,
        "topologies/detail.html",
        {
            "title": topology.name,
            "topology": topology,
            "spec": topology.spec,
            "roles": [(name, roles.get(name, {})) for name in ("prefill", "decode")],
            "revisions": revisions,
            "numbers": numbers,
            "from_n": from_n,
            "to_n": to_n,
            "diff": diff,
            "diff_error": diff_error,
            "manifests_yaml": to_yaml(current.manifests) if current is not None else "",
            "panels": rendered,
            "rollout": rollout,
            "revision_rows": rows,
            "folded_count": sum(1 for row in rows if row.folded),
            "ever_ran": ever_ran(topology),
            "failed_revisions": failed_revisions(topology),
            "hosts_panels": True,  # panel answers show inside their panels, not at the page top
            "sections": [
                ("summary", "Summary"),
                *(_SECTIONS[name] for name, _ in rendered if name in _SECTIONS),
                ("revisions", "Revisions"),
                ("manifests", "Manifests"),
            ],
        },
    )


def _field_errors(errors: dict[str, list[str]]) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """Errors attached to the nearest editor field, and the ones no field shows (path, message)."""
    by_field: dict[str, list[str]] = {}
    other: list[tuple[str, str]] = []
    for path, msgs in errors.items():
        target = (
            path
            if path in FIELDS
            else next((f for f in sorted(FIELDS, key=len, reverse=True) if path.startswith(f + ".")), None)
        )
        if target is None:
            other += [(path, m) for m in msgs]
        else:
            prefix = "" if target == path else f"{path[len(target) + 1 :]}: "
            by_field.setdefault(target, []).extend(prefix + m for m in msgs)
    return by_field, other


def _editor_context(
    request: HttpRequest,
    *,
    topology: Topology | None,
    values: dict[str, str],
    cluster_id: str,
    errors: dict[str, list[str]] | None = None,
    message: str = "",
) -> dict[str, Any]:
    by_field, other = _field_errors(errors or {})
    sections = [
        (title, intro, [(f, values.get(f.path, ""), by_field.get(f.path, [])) for f in fields])
        for title, intro, fields in SECTIONS
    ]
    from clusters.selectors import cluster_accelerators

    clusters = list(Cluster.objects.order_by("name"))
    return {
        # What each cluster's Ready, schedulable nodes advertise: the accelerator fields offer these.
        "accelerator_lists": [(c.pk, cluster_accelerators(c, ready_only=True)) for c in clusters],
        "title": f"Edit {topology.name}" if topology else "New topology",
        "topology": topology,
        "sections": sections,
        "clusters": clusters,
        "cluster_id": cluster_id,
        "presets": list(PRESETS.values()),
        "other_errors": other,
        "message": message,
        "connector_type": values.get("connector.type", ""),
    }


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def topology_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _save(request, topology=None)
    preset = PRESETS.get(request.GET.get("preset", ""))
    start = preset.as_spec() if preset else PRESETS["qwen-gpu-nixl"].as_spec(name="", model_name="", image="")
    first = Cluster.objects.order_by("name").first()
    cluster_id = request.GET.get("cluster") or (str(first.pk) if first else "")
    return render(
        request,
        "topologies/editor.html",
        _editor_context(request, topology=None, values=spec_to_values(start), cluster_id=cluster_id),
    )


@require_http_methods(["GET", "POST"])
@role_required(Role.OPERATOR)
def topology_edit(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(Topology.objects.select_related("cluster"), pk=pk)
    if request.method == "POST":
        return _save(request, topology=topology)
    return render(
        request,
        "topologies/editor.html",
        _editor_context(
            request,
            topology=topology,
            values=spec_to_values(topology.spec),
            cluster_id=str(topology.cluster_id),
        ),
    )


def _save(request: HttpRequest, *, topology: Topology | None) -> HttpResponse:
    values = {path: request.POST.get(path, "") for path in FIELDS}
    cluster_id = request.POST.get("cluster", "") if topology is None else str(topology.cluster_id)
    message = request.POST.get("message", "").strip()
    spec, _raw, errors = parse_values(request.POST)
    cluster = Cluster.objects.filter(pk=_int(cluster_id) or 0).first()
    if cluster is None:
        errors["cluster"] = ["choose the cluster to run on (register one on the Clusters page first)"]
    if spec is not None and cluster is not None and not errors:
        try:
            if topology is None:
                saved = services.topology_create(
                    cluster=cluster,
                    spec=spec,
                    actor=request.user,
                    source_ip=client_ip(request),
                    message=message,
                )
                messages.success(
                    request, f"Saved {saved.name} as revision 1. Deploy it when preflight is clean."
                )
            else:
                before = topology.current_revision_id
                saved = services.topology_update(
                    topology=topology,
                    spec=spec,
                    actor=request.user,
                    message=message,
                    source_ip=client_ip(request),
                )
                if saved.current_revision_id == before:
                    messages.info(request, "Nothing changed, so no new revision was saved.")
                else:
                    number = saved.current_revision.number if saved.current_revision else "?"
                    messages.success(request, f"Saved revision {number}. Deploy it to apply the change.")
            return HttpResponseRedirect(reverse("topologies:detail", args=[saved.pk]))
        except SpecError as error:
            errors.update(error.errors)
        except DomainError as error:
            for path, msgs in (error.fields or {"": [error.message]}).items():
                errors.setdefault(path.removeprefix("spec.") or "name", []).extend(msgs)
    context = _editor_context(
        request, topology=topology, values=values, cluster_id=cluster_id, errors=errors, message=message
    )
    context["cluster_error"] = errors.get("cluster", [])
    return render(request, "topologies/editor.html", context, status=400)


@require_POST
@role_required(Role.OPERATOR)
def editor_preflight(request: HttpRequest) -> HttpResponse:
    """The editor's live preflight: the form as typed, checked against the chosen cluster."""
    topology = Topology.objects.filter(pk=_int(request.POST.get("topology")) or 0).first()
    cluster = (
        topology.cluster
        if topology
        else Cluster.objects.filter(pk=_int(request.POST.get("cluster")) or 0).first()
    )
    spec, _raw, errors = parse_values(request.POST)
    context: dict[str, Any] = {"cluster": cluster, "spec_errors": sorted(errors.items()), "findings": None}
    if cluster is not None and spec is not None:
        context["findings"] = services.spec_preflight(cluster=cluster, spec=spec, topology=topology)
    return render(request, "topologies/_preflight.html", context)


@require_POST
@role_required(Role.OPERATOR)  # the same rule as POST /api/v1/topologies/<id>/preflight/
def detail_preflight(request: HttpRequest, pk: int) -> HttpResponse:
    topology = get_object_or_404(Topology.objects.select_related("cluster", "current_revision"), pk=pk)
    findings = services.topology_preflight(topology=topology)
    return render(
        request,
        "topologies/_preflight.html",
        {"cluster": topology.cluster, "spec_errors": [], "findings": findings},
    )
