"""Where a topology serves, read from its cluster: the external address of its router's Service.

The plain backend's router Service (``<topology>-router``) and, for Kthena, the Kthena router's Service
(``KTHENA_ROUTER_SERVICE``, default ``kthena-system/kthena-router``) are asked for a LoadBalancer
address; the first one found is the topology's discovered serving endpoint. An endpoint the operator
entered (an Ingress, say) always wins over a discovered one.
"""

from __future__ import annotations

import logging

from django.conf import settings

import kube
from clusters.selectors import cluster_connection
from topologies.models import Backend, Topology

logger = logging.getLogger(__name__)


def candidates(topology: Topology) -> list[tuple[str, str]]:
    """(namespace, Service name) to ask, in order (pure)."""
    if topology.backend == Backend.KTHENA:
        namespace, _, name = str(settings.KTHENA_ROUTER_SERVICE).partition("/")
        return [(namespace, name)]
    return [(topology.namespace, f"{topology.name}-router")]


def discover(topology: Topology) -> str:
    """The serving endpoint the cluster shows for this topology, or "" when it shows none."""
    try:
        conn = cluster_connection(topology.cluster)
    except Exception:
        return ""
    for namespace, name in candidates(topology):
        try:
            url = kube.service_external_url(conn, namespace, name)
        except kube.KubeError as error:
            logger.info(
                "no serving endpoint for %s from %s/%s: %s", topology.name, namespace, name, error.message
            )
            continue
        if url:
            return url
    return ""
