"""The cluster check: queued after every change, run by a worker, its facts and inventory stored."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import transaction
from django.utils import timezone

import kube
from audit.services import audit_record
from clusters.checks import CheckFacts, assess
from clusters.inspection import gather_facts
from clusters.models import (
    Cluster,
    ClusterHealthCheck,
    HealthState,
    NodeInventory,
)
from clusters.selectors import cluster_connection
from kube.kubeconfig import KubeconfigError

logger = logging.getLogger(__name__)

HISTORY_KEEP = 500


def queue_check(cluster_id: int) -> None:
    transaction.on_commit(lambda: _send_check(cluster_id))


def _send_check(cluster_id: int) -> None:
    """The full check after registration or a credential change. Without Redis the change still stands:
    the periodic check (CLUSTER_CHECK_SECONDS) runs it once Redis is back."""
    import redis
    from kombu.exceptions import OperationalError

    from clusters.tasks import check_cluster

    try:
        check_cluster.delay(cluster_id)
    except (OperationalError, redis.RedisError) as error:
        logger.warning(
            "cluster %s: full check not queued (Redis: %s); the periodic check runs it", cluster_id, error
        )


def cluster_check(*, cluster_id: int, actor: Any = None, source_ip: str | None = None) -> Cluster:
    """Full check: connectivity, version, permissions, CRDs, node inventory; stores state and history."""
    cluster = Cluster.objects.get(pk=cluster_id)
    started = time.monotonic()
    nodes: list[kube.NodeInfo] = []
    try:
        conn = cluster_connection(cluster)
    except KubeconfigError as exc:
        facts = CheckFacts(reachable=False, error=exc.message)
    else:
        facts, nodes = gather_facts(conn)
    state, message = assess(facts)
    elapsed = round((time.monotonic() - started) * 1000, 1)
    return _store_check(
        cluster_id=cluster_id,
        facts=facts,
        nodes=nodes,
        state=state,
        message=message,
        elapsed_ms=elapsed,
        actor=actor,
        source_ip=source_ip,
    )


@transaction.atomic
def _store_check(
    *,
    cluster_id: int,
    facts: CheckFacts,
    nodes: list[kube.NodeInfo],
    state: str,
    message: str,
    elapsed_ms: float,
    actor: Any,
    source_ip: str | None,
) -> Cluster:
    cluster = Cluster.objects.select_for_update().get(pk=cluster_id)
    now = timezone.now()
    previous = cluster.health_state
    cluster.health_state = state
    cluster.last_error = message
    cluster.last_checked = now
    cluster.last_latency_ms = facts.latency_ms
    if facts.reachable:
        cluster.version = facts.version
        cluster.permissions = facts.permissions
        if facts.crds is not None:
            cluster.installed_crds = sorted(facts.crds)
            cluster.kthena_installed = facts.kthena_installed
        if facts.nodes_total is not None:
            _replace_inventory(cluster, nodes, now)
    cluster.save()
    ClusterHealthCheck.objects.create(
        cluster=cluster,
        checked_at=now,
        state=state,
        latency_ms=facts.latency_ms,
        message=message or f"{facts.version}; check took {elapsed_ms:.0f} ms",
    )
    stale = cluster.health_checks.order_by("-checked_at", "-id").values_list("id", flat=True)[HISTORY_KEEP:]
    ClusterHealthCheck.objects.filter(id__in=list(stale)).delete()
    if actor is not None:
        audit_record(
            action="cluster.check", actor=actor, target=cluster, source_ip=source_ip, detail={"state": state}
        )
    elif previous != state and previous != HealthState.UNKNOWN:
        audit_record(
            action="cluster.health_changed",
            target=cluster,
            detail={"from": previous, "to": state, "message": message[:500]},
        )
    return cluster


def _replace_inventory(cluster: Cluster, nodes: list[kube.NodeInfo], now: Any) -> None:
    cluster.nodes.exclude(name__in=[n.name for n in nodes]).delete()
    for node in nodes:
        accelerators = {
            r: {
                "capacity": node.capacity.get(r, 0),
                "allocatable": node.allocatable.get(r, 0),
                "in_use": node.in_use.get(r, 0),
            }
            for r in node.accelerators
        }
        main = max(node.accelerators, key=lambda r: (node.capacity.get(r, 0), r)) if node.accelerators else ""
        NodeInventory.objects.update_or_create(
            cluster=cluster,
            name=node.name,
            defaults={
                "labels": node.labels,
                "ready": node.ready,
                "schedulable": not node.unschedulable,
                "accelerator_resource": main,
                "capacity": node.capacity.get(main, 0) if main else 0,
                "allocatable": node.allocatable.get(main, 0) if main else 0,
                "in_use": node.in_use.get(main, 0) if main else 0,
                "accelerators": accelerators,
                "seen": now,
            },
        )
