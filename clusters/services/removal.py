"""Removing a cluster, and the topologies on it first."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

import kube
from audit.services import audit_record
from clusters.models import (
    Cluster,
)
from clusters.selectors import cluster_topology_names
from controlplane.api.errors import Conflict

logger = logging.getLogger(__name__)


def cluster_delete(
    *, cluster: Cluster, confirm: bool = False, actor: Any = None, source_ip: str | None = None
) -> None:
    """Remove a cluster. Refused (409, naming them) while topologies run on it unless ``confirm``; with
    ``confirm`` their objects are removed through the topologies service first."""
    names = cluster_topology_names(cluster)
    if names and not confirm:
        raise Conflict(
            f"cluster {cluster.name} still runs {len(names)} topolog{'y' if len(names) == 1 else 'ies'}: "
            f"{', '.join(names)}; remove them first, or confirm to remove them with the cluster",
            code="cluster_in_use",
            fields={"confirm": ["set confirm=true to remove these topologies too"]},
        )
    if names:
        waiting = _remove_topologies(cluster, actor=actor, source_ip=source_ip)
        remaining = cluster_topology_names(cluster)
        if remaining:
            started = [name for name in remaining if name not in waiting]
            said = [f"removal of {', '.join(started)} has started"] if started else []
            said += [f"{name} waits: {why}" for name, why in waiting.items() if name in remaining]
            raise Conflict(
                f"{'; '.join(said)}; remove cluster {cluster.name} again once they are gone",
                code="cluster_in_use",
                fields={"confirm": ["wait for the topologies to be removed"]},
            )
    with transaction.atomic():
        pk, label = cluster.pk, cluster.name
        audit_record(
            action="cluster.delete",
            actor=actor,
            target=cluster,
            source_ip=source_ip,
            detail={"name": label, "topologies_removed": names},
        )
        cluster.delete()
    kube.forget(pk)
    logger.info("removed cluster %s", label)


def _remove_topologies(cluster: Cluster, *, actor: Any, source_ip: str | None) -> dict[str, str]:
    """Start the removal of every topology on the cluster (each a delete job that removes its objects,
    then the topology). Returns the topologies whose removal could not start yet, with the reason (a job
    of theirs, perhaps an earlier removal, is still running)."""
    from deployments.services import topology_delete_start

    waiting: dict[str, str] = {}
    for topology in list(cluster.topologies.all()):
        try:
            topology_delete_start(topology=topology, actor=actor, source_ip=source_ip)
        except Conflict as busy:
            waiting[topology.name] = busy.message
    return waiting
