"""Reads: clusters, the connection to one, its accelerators, its health history, what runs on it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from clusters.metrics import MetricsSettings
from clusters.models import AuthMethod, Cluster, ClusterHealthCheck, NodeInventory
from kube import ClusterConnection
from kube.kubeconfig import in_cluster_credentials


def cluster_list() -> QuerySet[Cluster]:
    """Clusters with node and accelerator totals (``node_count``, ``ready_nodes``, ``accel_*``)."""
    return Cluster.objects.annotate(
        node_count=Count("nodes", distinct=True),
        ready_nodes=Count("nodes", filter=Q(nodes__ready=True), distinct=True),
        accel_allocatable=Sum("nodes__allocatable"),
        accel_in_use=Sum("nodes__in_use"),
    ).order_by("name")


def cluster_connection(cluster: Cluster) -> ClusterConnection:
    """How ``kube`` reaches this cluster. In-cluster credentials are read afresh (projected tokens rotate)."""
    if cluster.auth_method == AuthMethod.IN_CLUSTER:
        creds = in_cluster_credentials()
        digest = hashlib.sha256(creds.token.encode()).hexdigest()[:12]
        return ClusterConnection(
            cluster_id=cluster.pk,
            server=creds.server,
            token=creds.token,
            ca_data=creds.ca_data or None,
            credential_version=f"{cluster.credential_version}-{digest}",
            cluster_name=cluster.name,
        )
    return ClusterConnection(
        cluster_id=cluster.pk,
        server=cluster.server,
        token=cluster.token or None,
        ca_data=cluster.ca_bundle or None,
        client_cert=cluster.client_cert or None,
        client_key=cluster.client_key or None,
        credential_version=cluster.credential_version,
        cluster_name=cluster.name,
    )


@dataclass(frozen=True)
class AcceleratorTotal:
    resource: str
    nodes: int
    capacity: int
    allocatable: int
    in_use: int

    @property
    def free(self) -> int:
        return max(self.allocatable - self.in_use, 0)


def cluster_accelerators(cluster: Cluster, *, ready_only: bool = False) -> list[AcceleratorTotal]:
    """Per accelerator resource name: node count and capacity/allocatable/in-use sums, largest first."""
    totals: dict[str, list[int]] = {}
    nodes = cluster.nodes.all()
    if ready_only:
        nodes = nodes.filter(ready=True, schedulable=True)
    for node in nodes:
        for resource, counts in (node.accelerators or {}).items():
            row = totals.setdefault(resource, [0, 0, 0, 0])
            row[0] += 1
            row[1] += int(counts.get("capacity", 0))
            row[2] += int(counts.get("allocatable", 0))
            row[3] += int(counts.get("in_use", 0))
    result = [AcceleratorTotal(r, *v) for r, v in totals.items()]
    return sorted(result, key=lambda t: (-t.allocatable, t.resource))


def cluster_nodes(cluster: Cluster) -> QuerySet[NodeInventory]:
    return cluster.nodes.order_by("name")


def cluster_health_history(cluster: Cluster, limit: int = 50) -> list[ClusterHealthCheck]:
    return list(cluster.health_checks.order_by("-checked_at", "-id")[:limit])


def cluster_topologies(cluster: Cluster) -> list[tuple[int, str]]:
    """(id, name) of the topologies placed on this cluster, by name."""
    related = getattr(cluster, "topologies", None)
    if related is None:
        return []
    return sorted(((t.pk, str(t)) for t in related.all()), key=lambda item: item[1])


def cluster_topology_names(cluster: Cluster) -> list[str]:
    """Names of the topologies placed on this cluster (empty when the topologies app has none)."""
    related = getattr(cluster, "topologies", None)
    if related is None:
        return []
    return sorted(str(t) for t in related.all())


@dataclass
class PermissionRow:
    resource: str
    group: str
    why: str
    allowed: list[str]
    denied: list[str]
    kthena: bool
    only_for: str = ""


def cluster_permission_rows(cluster: Cluster) -> list[PermissionRow]:
    """The access-review results grouped per resource (verbs allowed / denied), denied rows first."""
    rows: dict[tuple[str, str], PermissionRow] = {}
    for p in cluster.permissions or []:
        key = (str(p.get("group", "")), str(p.get("resource", "")))
        row = rows.get(key)
        if row is None:
            row = rows[key] = PermissionRow(
                key[1],
                key[0],
                str(p.get("why", "")),
                [],
                [],
                bool(p.get("kthena")),
                str(p.get("only_for") or ""),
            )
        # A resource that two features need (pods/proxy: the proxy metrics source and in-place switches)
        # is one row: each verb once, and every reason it is needed.
        why, only_for = str(p.get("why", "")), str(p.get("only_for") or "")
        if why and why not in row.why:
            row.why = f"{row.why}; {why}" if row.why else why
        if row.only_for and only_for and only_for not in row.only_for.split(" or "):
            row.only_for = f"{row.only_for} or {only_for}"
        elif not only_for:
            row.only_for = ""
        verb = str(p.get("verb", ""))
        if verb not in row.allowed and verb not in row.denied:
            (row.allowed if p.get("allowed") else row.denied).append(verb)
    return sorted(rows.values(), key=lambda r: (not r.denied, bool(r.only_for), r.kthena, r.resource))


def cluster_missing_rules(cluster: Cluster) -> str:
    """The RBAC rules (YAML) that would grant every permission the last check found denied."""
    from clusters.checks import missing_rules

    return missing_rules([p for p in cluster.permissions or [] if isinstance(p, dict)])


def check_due_clusters(*, older_than: timedelta = timedelta(seconds=50)) -> list[int]:
    """Ids of clusters not checked within ``older_than`` (the periodic task checks each of them)."""
    cutoff = timezone.now() - older_than
    return list(
        Cluster.objects.filter(Q(last_checked__isnull=True) | Q(last_checked__lt=cutoff)).values_list(
            "id", flat=True
        )
    )


def cluster_metrics_settings(cluster: Cluster) -> MetricsSettings:
    """The cluster's metrics source with its (decrypted) Prometheus credentials, for the collector."""
    return MetricsSettings(
        source=cluster.metrics_source,
        prometheus_url=cluster.prometheus_url,
        prometheus_token=cluster.prometheus_token,
        prometheus_username=cluster.prometheus_username,
        prometheus_password=cluster.prometheus_password,
    )


def same_server_warning(cluster: Cluster) -> str:
    """A warning when another registered cluster has the same API server (one cluster registered twice
    means two topologies can think they own the same namespace); empty otherwise."""
    if not cluster.server:
        return ""
    server = cluster.server.rstrip("/").lower()
    others = [
        c.name
        for c in Cluster.objects.exclude(pk=cluster.pk).only("name", "server")
        if c.server and c.server.rstrip("/").lower() == server
    ]
    if not others:
        return ""
    return (
        f"{cluster.server} is already registered as {', '.join(sorted(others))}; the same cluster under two "
        "names lets topologies of both manage the same namespaces. Remove one unless that is intended."
    )
