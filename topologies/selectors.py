"""Reads for topologies: lists, one topology with its revisions, a revision by number."""

from __future__ import annotations

from django.db.models import QuerySet

from topologies.models import Revision, Topology


def topology_list() -> QuerySet[Topology]:
    return Topology.objects.select_related("cluster", "current_revision", "deployed_revision").order_by(
        "name", "id"
    )


def topology_revisions(topology: Topology) -> QuerySet[Revision]:
    return Revision.objects.filter(topology=topology).select_related("created_by").order_by("-number")


def revision_get(topology: Topology, number: int) -> Revision | None:
    return Revision.objects.filter(topology=topology, number=number).first()
