"""Thin Celery tasks: fan out collection every interval, collect one topology, roll up and prune."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from telemetry import cache, services


@shared_task(name="telemetry.tasks.collect_all", ignore_result=True, acks_late=False)
def collect_all() -> int:
    """Enqueue one collection per deployed topology; each expires after one interval, so a slow or
    stopped worker never builds a backlog. Returns how many were enqueued."""
    from topologies.models import Topology

    interval = float(settings.TELEMETRY_INTERVAL_SECONDS)
    ids = list(Topology.objects.filter(deployed_revision__isnull=False).values_list("pk", flat=True))
    for topology_id in ids:
        collect_topology.apply_async(args=[topology_id], expires=interval, queue="telemetry")
    return len(ids)


@shared_task(name="telemetry.tasks.collect_topology", ignore_result=True, acks_late=False)
def collect_topology(topology_id: int) -> bool:
    """Collect one topology unless another collection of it is still running (idempotent).

    Not acks-late: a lost collection is replaced by the next interval's, never redelivered late."""
    interval = float(settings.TELEMETRY_INTERVAL_SECONDS)
    with cache.collection_lock(topology_id, seconds=interval * 3) as held:
        if not held:
            return False
        services.telemetry_collect(topology_id=topology_id)
        return True


@shared_task(name="telemetry.tasks.rollup_and_prune", ignore_result=True)
def rollup_and_prune() -> dict[str, int]:
    return services.telemetry_rollup_and_prune()
