"""Reads for topologies: lists, one topology with its revisions, a revision by number, a diff of two."""

from __future__ import annotations

import difflib

from django.db.models import QuerySet

from topologies.models import Revision, Topology
from topologies.render import to_yaml


def topology_list() -> QuerySet[Topology]:
    return Topology.objects.select_related("cluster", "current_revision", "deployed_revision").order_by(
        "name", "id"
    )


def topology_revisions(topology: Topology) -> QuerySet[Revision]:
    return Revision.objects.filter(topology=topology).select_related("created_by").order_by("-number")


def revision_get(topology: Topology, number: int) -> Revision | None:
    return Revision.objects.filter(topology=topology, number=number).first()


def revision_diff(a: Revision, b: Revision) -> str:
    """Unified diff of two revisions' manifests as YAML with sorted keys ("" when identical)."""
    lines = difflib.unified_diff(
        to_yaml(a.manifests).splitlines(keepends=True),
        to_yaml(b.manifests).splitlines(keepends=True),
        fromfile=f"revision {a.number}",
        tofile=f"revision {b.number}",
    )
    return "".join(lines)


def pod_selector(topology: Topology) -> str:
    """The label selector of the topology's pods: Tandem's topology label, or an adopted workload's own."""
    from kube.labels import topology_selector

    return topology.pod_selector or topology_selector(topology.pk)
