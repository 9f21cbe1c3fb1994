"""Writes for topologies: create, update (one immutable revision per change), preflight on a cluster."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Max

from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from topologies import preflight_cache
from topologies.import_selectors import node_facts
from topologies.importing import ImportResult, import_manifests
from topologies.models import Revision, Topology
from topologies.preflight import (
    ERROR,
    ClusterFacts,
    Finding,
    ObjectFacts,
    master_service,
    run_preflight,
)
from topologies.preflight_names import model_name_findings
from topologies.render import kthena, render
from topologies.spec import SpecError, TopologySpec

if TYPE_CHECKING:
    from clusters.models import Cluster

logger = logging.getLogger(__name__)


def _parse(spec: dict[str, Any] | TopologySpec) -> TopologySpec:
    return spec if isinstance(spec, TopologySpec) else TopologySpec.from_dict(spec)


def _denormalise(topology: Topology, parsed: TopologySpec) -> None:
    topology.name = parsed.name
    topology.namespace = parsed.namespace
    topology.model_name = parsed.model_name
    topology.engine = parsed.engine
    topology.image = parsed.image
    topology.backend = parsed.backend
    topology.kv_connector = parsed.connector.type
    topology.spec = parsed.to_dict()
    # 0: not set (an imported topology until the operator answers); telemetry and the planner read
    # it as no target (docs/import.md)
    topology.slo_ttft_ms = parsed.slo.ttft_ms or 0
    topology.slo_tbt_ms = parsed.slo.tbt_ms or 0


def _revision_add(*, topology: Topology, parsed: TopologySpec, actor: Any, message: str) -> Revision:
    latest = topology.revisions.aggregate(n=Max("number"))["n"] or 0
    number = latest + 1
    return Revision.objects.create(
        topology=topology,
        number=number,
        spec=parsed.to_dict(),
        manifests=render(parsed, topology_id=topology.pk, revision=number),
        message=message[:500],
        created_by=actor if actor is not None and getattr(actor, "is_authenticated", False) else None,
    )


def _name_taken(cluster: Cluster, name: str, exclude: int | None = None) -> bool:
    qs = Topology.objects.filter(cluster=cluster, name=name)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    return qs.exists()


@transaction.atomic
def topology_create(
    *,
    cluster: Cluster,
    spec: dict[str, Any] | TopologySpec,
    actor: Any,
    source_ip: str | None = None,
    message: str = "",
) -> Topology:
    """Create a topology and its revision 1. Raises SpecError (invalid spec) or Conflict (name taken)."""
    parsed = _parse(spec)
    if _name_taken(cluster, parsed.name):
        raise Conflict(
            f"a topology named {parsed.name} already exists on cluster {cluster.name}",
            code="name_taken",
            fields={"spec.name": [f"{parsed.name} is taken on {cluster.name}; choose another name"]},
        )
    topology = Topology(
        cluster=cluster, created_by=actor if getattr(actor, "is_authenticated", False) else None
    )
    _denormalise(topology, parsed)
    topology.save()
    revision = _revision_add(topology=topology, parsed=parsed, actor=actor, message=message or "created")
    topology.current_revision = revision
    topology.save(update_fields=["current_revision"])
    audit_record(
        action="topology.create",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={
            "cluster": cluster.name,
            "revision": revision.number,
            "engine": parsed.engine,
            "backend": parsed.backend,
            "connector": parsed.connector.type,
        },
    )
    return topology


@transaction.atomic
def topology_update(
    *,
    topology: Topology,
    spec: dict[str, Any] | TopologySpec,
    actor: Any,
    message: str = "",
    source_ip: str | None = None,
) -> Topology:
    """Save a changed spec as a new revision; an unchanged spec saves nothing and returns the topology.

    The name and namespace are fixed once created: they name the objects in the cluster.
    """
    locked = Topology.objects.select_for_update().get(pk=topology.pk)
    parsed = _parse(spec)
    errors: dict[str, list[str]] = {}
    if parsed.name != locked.name:
        errors["name"] = [
            f"cannot change after creation (it is {locked.name}); create a new topology instead"
        ]
    if parsed.namespace != locked.namespace:
        errors["namespace"] = [
            f"cannot change after creation (it is {locked.namespace}); create a new topology instead"
        ]
    if errors:
        raise SpecError(errors)
    if parsed.to_dict() == locked.spec:
        return locked
    _denormalise(locked, parsed)
    revision = _revision_add(topology=locked, parsed=parsed, actor=actor, message=message or "updated")
    locked.current_revision = revision
    locked.save()
    audit_record(
        action="topology.update",
        actor=actor,
        target=locked,
        source_ip=source_ip,
        detail={"revision": revision.number, "message": revision.message},
    )
    return locked


def _own_in_use(pods: list[Any], spec: TopologySpec | None) -> dict[str, dict[str, int]]:
    from kube import labels

    held: dict[str, dict[str, int]] = {}
    if spec is None:
        return held
    for pod in pods:
        role = pod.labels.get(labels.ROLE)
        if role not in ("prefill", "decode") or not pod.node or pod.phase in ("Succeeded", "Failed"):
            continue
        r = spec.role(role)
        node = held.setdefault(pod.node, {})
        node[r.accelerator_resource] = node.get(r.accelerator_resource, 0) + r.accelerator_count
    return held


# Resources whose access reviews carry no namespace; `list pods` is asked cluster-wide because the
# accelerator count lists pods in every namespace.
_CLUSTER_WIDE = {
    ("", "nodes"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
}


def _denied_needs(conn: Any, spec: TopologySpec) -> frozenset[tuple[str, str, str]]:
    """The permissions a deploy of ``spec`` needs that the cluster denies, asked in the target namespace
    (so a RoleBinding there counts, as it does for the deploy itself)."""
    from clusters.inspection import review_needs
    from topologies.preflight import spec_needs

    wanted = spec_needs(spec)
    results = review_needs(
        conn,
        wanted,
        namespace=spec.namespace,
        cluster_wide=lambda n: (n.group, n.resource) in _CLUSTER_WIDE or n.key == ("list", "", "pods"),
    )
    return frozenset(n.key for n in wanted if not results[n.key].allowed)


def _served_kthena_crds(conn: Any) -> frozenset[str]:
    """Names of the Kthena CRDs the cluster serves, from API discovery (small, cached answers)
    rather than listing CRDs (whose schemas run to megabytes)."""
    from kube import KubeNotInstalled
    from kube.resources import resolve

    served: set[str] = set()
    for api_version, kind in kthena.KINDS:
        try:
            resource = resolve(conn, api_version, kind)
        except KubeNotInstalled:
            continue
        served.add(f"{resource.plural}.{resource.group}")
    return frozenset(served)


def cluster_facts(*, cluster: Cluster, spec: TopologySpec, topology: Topology | None = None) -> ClusterFacts:
    """Read what preflight needs from the cluster through ``kube``; an unreachable cluster is a fact too."""
    import kube
    from clusters.selectors import cluster_connection
    from kube import labels
    from kube.kubeconfig import KubeconfigError

    try:
        conn = cluster_connection(cluster)
        crds = _served_kthena_crds(conn) if spec.backend == "kthena" else frozenset()
        denied = _denied_needs(conn, spec)
        if denied:  # reads below could be refused too; the permission findings say what to grant
            return ClusterFacts(crds=crds, denied=denied, partial=True)
        nodes = node_facts(conn)
        namespace_exists = kube.get_object(conn, "v1", "Namespace", None, spec.namespace) is not None
        can_create = ("patch", "", "namespaces") not in denied  # a deploy creates it by server-side apply
        objects: list[ObjectFacts] = []
        if namespace_exists:
            for obj in render(spec, topology_id=0, revision=0):
                if obj["apiVersion"].startswith(("workload.serving", "networking.serving")) and not (
                    set(kthena.REQUIRED_CRDS) <= crds
                ):
                    continue
                live = kube.get_object(
                    conn, obj["apiVersion"], obj["kind"], spec.namespace, obj["metadata"]["name"]
                )
                if live is not None:
                    meta = live.get("metadata") or {}
                    objects.append(
                        ObjectFacts(
                            obj["kind"],
                            spec.namespace,
                            obj["metadata"]["name"],
                            dict(meta.get("labels") or {}),
                        )
                    )
        services: list[ObjectFacts] = []
        target = master_service(spec) if spec.connector.type == "mooncake-store" else None
        if target is not None:
            namespace, name, _port = target
            live = kube.get_object(conn, "v1", "Service", namespace, name)
            if live is not None:
                ports = tuple(int(p.get("port", 0)) for p in (live.get("spec") or {}).get("ports") or [])
                services.append(
                    ObjectFacts(
                        "Service",
                        namespace,
                        name,
                        dict((live.get("metadata") or {}).get("labels") or {}),
                        ports,
                    )
                )
        own: dict[str, dict[str, int]] = {}
        if topology is not None and topology.pk and namespace_exists:
            deployed = topology.deployed_revision
            deployed_spec = TopologySpec.from_dict(deployed.spec) if deployed is not None else None
            pods = kube.list_pods(conn, spec.namespace, labels.topology_selector(topology.pk))
            own = _own_in_use(pods, deployed_spec)
    except (kube.KubeError, KubeconfigError, DomainError) as error:
        logger.info("preflight could not read cluster %s: %s", cluster.name, error)
        return ClusterFacts(reachable=False, error=str(getattr(error, "message", error)))
    return ClusterFacts(
        denied=denied,
        crds=crds,
        nodes=nodes,
        namespace_exists=namespace_exists,
        can_create_namespace=can_create,
        objects=tuple(objects),
        services=tuple(services),
        own_in_use=own,
    )


def spec_preflight(
    *,
    cluster: Cluster,
    spec: dict[str, Any] | TopologySpec,
    topology: Topology | None = None,
    facts: ClusterFacts | None = None,
) -> list[Finding]:
    """Preflight an unsaved spec against a cluster (raises SpecError when the spec itself is invalid).

    ``facts``: already read (``topology_preflight_bounded``); otherwise they are read live and remembered,
    so an explicit preflight refreshes what the topology page shows (``topologies.preflight_cache``)."""
    parsed = _parse(spec)
    if facts is None:
        facts = cluster_facts(cluster=cluster, spec=parsed, topology=topology)
        preflight_cache.remember(
            preflight_cache.facts_key(cluster=cluster, spec=parsed, topology=topology), facts
        )
    deployed = topology.deployed_revision if topology is not None else None
    topology_id = topology.pk if topology is not None else None
    findings = run_preflight(
        parsed,
        facts,
        topology_id=topology_id,
        deployed=TopologySpec.from_dict(deployed.spec) if deployed is not None else None,
    )
    findings += model_name_findings(spec=parsed, cluster_id=cluster.pk, topology_id=topology_id)
    return sorted(findings, key=lambda f: (f.level != ERROR, f.field, f.code))


def topology_preflight(*, topology: Topology, revision: Revision | None = None) -> list[Finding]:
    """Preflight a saved revision (default: the current one) against the topology's cluster."""
    chosen = revision or topology.current_revision
    spec = TopologySpec.from_dict(chosen.spec if chosen is not None else topology.spec)
    return spec_preflight(cluster=topology.cluster, spec=spec, topology=topology)


def topology_preflight_bounded(
    *, topology: Topology, revision: Revision | None = None, timeout: float | None = None
) -> list[Finding]:
    """Preflight for the topology page and the deploy API: the facts cached for this spec, cluster and
    deploy state, or read within ``timeout`` (default ``PREFLIGHT_PAGE_TIMEOUT_SECONDS``); a cluster that
    does not answer in time is a ``cluster_unreachable`` finding, never a page that hangs."""
    chosen = revision or topology.current_revision
    spec = TopologySpec.from_dict(chosen.spec if chosen is not None else topology.spec)
    cluster = topology.cluster
    _ = topology.deployed_revision  # loaded here: the background read must not need this thread's database

    def read() -> ClusterFacts:
        return cluster_facts(cluster=cluster, spec=spec, topology=topology)

    facts = preflight_cache.bounded_facts(
        cluster=cluster, spec=spec, topology=topology, read=read, timeout=timeout
    )
    return spec_preflight(cluster=cluster, spec=spec, topology=topology, facts=facts)


@transaction.atomic
def topology_import(
    *,
    cluster: Cluster,
    text: str,
    actor: Any,
    overrides: dict[str, Any] | None = None,
    source_ip: str | None = None,
    message: str = "",
) -> tuple[Topology, ImportResult]:
    """Create a topology from Kthena or plain-Deployment YAML. Raises SpecError naming what to fix
    (the YAML, or a spec field the YAML lacks) when the import does not give a valid spec."""
    result = import_manifests(text, overrides=overrides)
    if not result.ok:
        raise SpecError({key.removeprefix("spec."): messages for key, messages in result.errors.items()})
    report = result.report.as_dict()
    topology = topology_create(
        cluster=cluster,
        spec=result.spec,
        actor=actor,
        source_ip=source_ip,
        message=message or f"imported from {result.source} YAML",
    )
    audit_record(
        action="topology.import",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={
            "source": result.source,
            "mapped": len(report["mapped"]),
            "verbatim": len(report["verbatim"]),
            "unsupported": [n["source"] for n in report["unsupported"]][:50],
            "changed": len(report["changed"]),
            "questions": [n["target"] for n in report["questions"]],
        },
    )
    return topology, result


@transaction.atomic
def topology_desired_set(*, topology: Topology, revision: Revision) -> Topology:
    """Make ``revision`` the desired one (a rollback asks for it): the spec shown and edited follows it,
    so desired and running agree once it runs. No new revision is saved."""
    locked = Topology.objects.select_for_update().get(pk=topology.pk)
    if locked.current_revision_id == revision.pk:
        return locked
    _denormalise(locked, TopologySpec.from_dict(revision.spec))
    locked.current_revision = revision
    locked.save()
    return locked
