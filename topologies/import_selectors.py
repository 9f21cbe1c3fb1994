"""Reads for the import preview: do the selected cluster's nodes offer what the imported spec asks for?

The same accelerator check preflight runs (``preflight.check_accelerators``), on the nodes ``kube``
lists, so a resource name no node offers (``huawei.com/Ascend910`` on nodes that advertise
``huawei.com/ascend-1980``) is named at preview, before anything is saved.
"""

from __future__ import annotations

import logging
from typing import Any

from topologies.preflight import check_accelerators
from topologies.preflight_facts import ERROR, WARNING, ClusterFacts, Finding, NodeFacts
from topologies.spec import TopologySpec

logger = logging.getLogger(__name__)
# Findings of the accelerator check that say the YAML asks for what the nodes cannot give.
NODE_CODES = ("no_nodes", "node_selector_unmatched", "accelerator_resource_unknown", "accelerators_per_pod")


def node_facts(conn: Any) -> tuple[NodeFacts, ...]:
    import kube

    return tuple(
        NodeFacts(
            name=n.name,
            labels=dict(n.labels),
            ready=n.ready,
            unschedulable=n.unschedulable,
            allocatable=dict(n.allocatable),
            in_use=dict(n.in_use),
        )
        for n in kube.list_nodes(conn)
    )


def import_node_findings(*, cluster: Any, spec: dict[str, Any] | TopologySpec) -> list[Finding]:
    """Each role's accelerator resource (and node selector) checked against ``cluster``'s nodes.
    A cluster that cannot be read gives one warning saying the names were not checked."""
    import kube
    from clusters.selectors import cluster_connection
    from controlplane.api.errors import DomainError
    from kube.kubeconfig import KubeconfigError

    parsed = spec if isinstance(spec, TopologySpec) else TopologySpec.from_dict(spec)
    try:
        nodes = node_facts(cluster_connection(cluster))
    except (kube.KubeError, KubeconfigError, DomainError) as error:
        logger.info("import preview could not list the nodes of cluster %s: %s", cluster.name, error)
        return [
            Finding(
                WARNING,
                "nodes_unread",
                "cluster",
                f"cannot read the nodes of {cluster.name}, so the accelerator names are not checked "
                f"({getattr(error, 'message', None) or type(error).__name__})",
                "check the cluster's connection on its page; preflight checks them again before a deploy",
            )
        ]
    found = check_accelerators(parsed, ClusterFacts(nodes=nodes))
    return [f for f in found if f.code in NODE_CODES and f.level == ERROR]
