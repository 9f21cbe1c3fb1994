"""Writes of the clusters app (``registration``: register a cluster; ``updates``: change its name,
credentials, context or metrics source, test its connection; ``tracestore``: where engine spans are
read; ``checking``: the cluster check and its stored facts; ``removal``: remove it and its
topologies). Credentials never leave these modules in words."""

from clusters.services.checking import cluster_check
from clusters.services.registration import cluster_register
from clusters.services.removal import cluster_delete
from clusters.services.tracestore import cluster_set_trace_store
from clusters.services.updates import cluster_set_metrics_source, cluster_test_connection, cluster_update

__all__ = [
    "cluster_check",
    "cluster_delete",
    "cluster_register",
    "cluster_set_metrics_source",
    "cluster_set_trace_store",
    "cluster_test_connection",
    "cluster_update",
]
