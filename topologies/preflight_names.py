"""Preflight: a model name another topology already serves through the same router, or the same gateway.

Kthena runs one router per cluster and matches ModelRoutes by model name, so two topologies of one
cluster that route the same name fight over it wherever they live; the plain backend runs a router
per namespace. Tandem's gateway routes by model name across every cluster: two topologies with one
name there cannot both be reached by it. The check is pure (``check_model_names``); ``name_claims``
reads the other topologies from the database.
"""

from __future__ import annotations

from dataclasses import dataclass

from topologies.preflight_facts import ERROR, WARNING, Finding
from topologies.spec import TopologySpec


@dataclass(frozen=True)
class NameClaim:
    """Another topology that serves (or is being deployed to serve) model names."""

    topology_id: int
    name: str
    cluster_id: int
    cluster_name: str
    namespace: str
    backend: str
    routed_name: str  # the name its router matches (Kthena's ModelRoute modelName)
    gateway_name: str  # the name Tandem's gateway sends to it


def shares_router(spec: TopologySpec, cluster_id: int, other: NameClaim) -> bool:
    """Kthena: one router per cluster; the plain backend: one router per namespace."""
    if other.cluster_id != cluster_id or other.backend != spec.backend:
        return False
    return spec.backend == "kthena" or other.namespace == spec.namespace


def check_model_names(
    spec: TopologySpec, *, cluster_id: int, topology_id: int | None, others: list[NameClaim]
) -> list[Finding]:
    out: list[Finding] = []
    for other in others:
        if topology_id is not None and other.topology_id == topology_id:
            continue
        where = f"topology {other.name} ({other.cluster_name}, namespace {other.namespace})"
        if other.routed_name == spec.routing.model_name and shares_router(spec, cluster_id, other):
            router = (
                f"the Kthena router of cluster {other.cluster_name}"
                if spec.backend == "kthena"
                else f"the router of namespace {spec.namespace}"
            )
            out.append(
                Finding(
                    ERROR,
                    "model_name_taken",
                    "routing.model_name",
                    f"{where} already serves model {spec.routing.model_name} through {router}; "
                    "both would answer to the same name and the router would pick one",
                    f"give this topology another model name (routing.model_name), or remove "
                    f"{other.name} first",
                )
            )
        elif other.gateway_name == spec.model_name:
            out.append(
                Finding(
                    WARNING,
                    "model_name_shared_gateway",
                    "model_name",
                    f"{where} already serves model {spec.model_name} through Tandem's gateway; "
                    f"the gateway keeps sending {spec.model_name} to {other.name}, which claimed it first",
                    "give this topology another model name, or an alias in its gateway settings",
                )
            )
    return out


def name_claims(*, spec: TopologySpec, topology_id: int | None) -> list[NameClaim]:
    """Other topologies that run (a deployed revision, or a deploy under way) and route either of the
    spec's names."""
    from django.db.models import Q

    from deployments.models import ACTIVE_STATES
    from topologies.models import Topology

    running = Q(deployed_revision__isnull=False) | Q(deployments__state__in=ACTIVE_STATES)
    # Every running topology: the name its router matches lives in its deployed spec, not in a column.
    rows = Topology.objects.filter(running).select_related("cluster", "deployed_revision").distinct()
    if topology_id is not None:
        rows = rows.exclude(pk=topology_id)
    claims = []
    for row in rows.order_by("id"):
        served = row.deployed_revision.spec if row.deployed_revision is not None else row.spec
        routing = served.get("routing") or {}
        routed = str(routing.get("model_name") or served.get("model_name") or row.model_name)
        if spec.routing.model_name != routed and spec.model_name != row.model_name:
            continue
        claims.append(
            NameClaim(
                topology_id=row.pk,
                name=row.name,
                cluster_id=row.cluster_id,
                cluster_name=row.cluster.name,
                namespace=row.namespace,
                backend=row.backend,
                routed_name=routed,
                gateway_name=row.model_name,
            )
        )
    return claims


def model_name_findings(*, spec: TopologySpec, cluster_id: int, topology_id: int | None) -> list[Finding]:
    others = name_claims(spec=spec, topology_id=topology_id)
    return check_model_names(spec, cluster_id=cluster_id, topology_id=topology_id, others=others)
