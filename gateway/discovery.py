"""Where a topology serves, read from its cluster: the external address of its router's Service.

The plain backend's router Service (``<topology>-router``) and, for Kthena, the Kthena router's Service
(``KTHENA_ROUTER_SERVICE``, default ``kthena-system/kthena-router``) are asked for a LoadBalancer
address; the first one found is the topology's discovered serving endpoint (``https`` when the Service
says so: ``kube.service_url``). An endpoint the operator entered (an Ingress, say) always wins over a
discovered one.

The data plane must outlive control-plane trouble: only a positive answer from the cluster (the API
server's 404 NotFound for the Service, or a Service without an external address) clears an endpoint.
A 403, a 5xx, a timeout or an unreachable cluster is no answer: the last known endpoint is kept, and
marked stale with the reason. Clusters are read concurrently, each within its own deadline, so one slow
or unreachable cluster delays no other.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

from django.conf import settings

import kube
from clusters.selectors import cluster_connection
from topologies.models import Backend, Topology

logger = logging.getLogger(__name__)
DEADLINE_SECONDS = 10.0  # per cluster and round (a third of the default 30 s discovery interval)
MAX_THREADS = 8


@dataclass(frozen=True)
class Found:
    """What one look at the cluster said about a topology's serving endpoint.

    ``answered``: the cluster answered; ``url`` is then its answer ("" = positively none). Not answered:
    ``url`` means nothing, and ``reason`` says why (the caller keeps the last known endpoint)."""

    answered: bool
    url: str = ""
    reason: str = ""


def candidates(topology: Topology) -> list[tuple[str, str]]:
    """(namespace, Service name) to ask, in order (pure)."""
    if topology.backend == Backend.KTHENA:
        namespace, _, name = str(settings.KTHENA_ROUTER_SERVICE).partition("/")
        return [(namespace, name)]
    return [(topology.namespace, f"{topology.name}-router")]


def deadline_seconds() -> float:
    return float(getattr(settings, "GATEWAY_DISCOVERY_DEADLINE_SECONDS", DEADLINE_SECONDS))


def discover(topology: Topology, conn: kube.ClusterConnection, *, until: float) -> Found:
    """The serving endpoint the cluster shows for this topology, asking before `until` (monotonic)."""
    for namespace, name in candidates(topology):
        left = until - time.monotonic()
        if left <= 0.5:
            return Found(False, reason=f"no answer from cluster {conn.cluster_name} within the deadline")
        try:
            url = kube.service_external_url(conn, namespace, name, deadline=left)
        except kube.KubeError as error:
            logger.info("cannot read the serving endpoint of %s: %s", topology.name, error.message)
            return Found(False, reason=error.message[:500])
        if url:
            return Found(True, url)
    return Found(True)


def _one_cluster(topologies: list[Topology], conn: kube.ClusterConnection, until: float) -> dict[int, Found]:
    return {topology.pk: discover(topology, conn, until=until) for topology in topologies}


def discover_all(topologies: list[Topology]) -> dict[int, Found]:
    """Found per topology id: every cluster read at once, each within its own deadline; a cluster that
    does not finish in time gives "not answered" for its topologies (its thread is left to end alone)."""
    by_cluster: dict[int, list[Topology]] = defaultdict(list)
    for topology in topologies:
        by_cluster[topology.cluster_id].append(topology)
    results: dict[int, Found] = {}
    seconds = deadline_seconds()
    jobs = {}
    pool = ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(by_cluster))))
    try:
        until = time.monotonic() + seconds
        for members in by_cluster.values():
            cluster = members[0].cluster
            try:
                conn = cluster_connection(cluster)
            except Exception as error:  # in-cluster credentials unreadable, say: no answer, keep the endpoint
                for topology in members:
                    results[topology.pk] = Found(False, reason=f"cannot connect to {cluster.name}: {error}")
                continue
            jobs[pool.submit(_one_cluster, members, conn, until)] = members
        done, _ = wait(jobs, timeout=seconds + 1.0)
        for job, members in jobs.items():
            if job in done and job.exception() is None:
                results.update(job.result())
                continue
            why = (
                f"no answer from cluster {members[0].cluster.name} within {seconds:g} s"
                if job not in done
                else f"reading cluster {members[0].cluster.name} failed: {job.exception()}"
            )
            results.update({topology.pk: Found(False, reason=why) for topology in members})
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return results
