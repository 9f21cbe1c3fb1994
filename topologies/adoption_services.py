"""Writes for adoption: take over a running workload as revision 1 (no pod restarts), and release it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from django.db import transaction

import kube
from audit.services import audit_record
from controlplane.api.errors import Conflict, DomainError
from topologies import adoption
from topologies.importing import import_manifests
from topologies.models import DriftState, Revision, Topology
from topologies.services import _denormalise, _name_taken
from topologies.spec import SpecError, TopologySpec

if TYPE_CHECKING:
    from clusters.models import Cluster


def _conn(cluster: Cluster) -> kube.ClusterConnection:
    from clusters.selectors import cluster_connection

    return cluster_connection(cluster)


def _kube_error(error: kube.KubeError, what: str) -> DomainError:
    return DomainError(f"{what}: {error.message}", code="cluster_error", status_code=502)


@transaction.atomic
def topology_adopt(
    *,
    cluster: Cluster,
    kind: str,
    namespace: str,
    name: str,
    actor: Any,
    overrides: dict[str, Any] | None = None,
    source_ip: str | None = None,
) -> Topology:
    """Adopt a ModelServing (with its ModelServer/ModelRoute) or a prefill/decode Deployment pair.

    Revision 1 holds the objects as they run, with Tandem's labels on the objects only; a forced
    server-side apply of it makes Tandem the owner of their fields without changing a pod template, so no
    pod restarts. Raises SpecError (what the import lacks) or DomainError (gone, taken, cluster errors).
    """
    conn = _conn(cluster)
    try:
        objects = adoption.candidate_objects(conn, kind=kind, namespace=namespace, name=name)
    except kube.KubeError as error:
        raise _kube_error(error, f"cannot read {kind} {namespace}/{name}") from None
    if not objects:
        raise DomainError(
            f"{kind} {namespace}/{name} is not there to adopt (gone, or Tandem manages it already)",
            code="not_found",
            status_code=404,
            fields={"name": ["pick one from GET /api/v1/topologies/adoptable/?cluster=ID"]},
        )
    result = import_manifests(yaml.safe_dump_all(objects, sort_keys=False), overrides=overrides)
    if not result.ok:
        raise SpecError({k.removeprefix("spec."): v for k, v in result.errors.items()})
    parsed = TopologySpec.from_dict(result.spec)
    if _name_taken(cluster, parsed.name):
        raise Conflict(
            f"a topology named {parsed.name} already exists on cluster {cluster.name}",
            code="name_taken",
            fields={"name": [f"{parsed.name} is taken on {cluster.name}"]},
        )
    topology = Topology(
        cluster=cluster,
        created_by=actor if getattr(actor, "is_authenticated", False) else None,
        pod_selector=adoption.pod_selector_of(objects),
        adopted_from=[
            {
                "apiVersion": o["apiVersion"],
                "kind": o["kind"],
                "namespace": namespace,
                "name": o["metadata"]["name"],
            }
            for o in objects
        ],
    )
    _denormalise(topology, parsed)
    topology.save()
    manifests = adoption.owned_manifests(objects, topology_id=topology.pk)
    revision = Revision.objects.create(
        topology=topology,
        number=1,
        spec=parsed.to_dict(),
        manifests=manifests,
        message=f"adopted {kind} {namespace}/{name} as it runs",
        created_by=topology.created_by,
    )
    try:
        kube.apply_objects(conn, manifests, force=True)
    except kube.KubeError as error:
        raise _kube_error(error, f"cannot take ownership of {kind} {namespace}/{name}") from None
    topology.current_revision = revision
    topology.deployed_revision = revision
    topology.drift_state = DriftState.IN_SYNC
    topology.save(update_fields=["current_revision", "deployed_revision", "drift_state"])
    audit_record(
        action="topology.adopt",
        actor=actor,
        target=topology,
        source_ip=source_ip,
        detail={
            "cluster": cluster.name,
            "kind": kind,
            "objects": [f"{o['kind']}/{o['metadata']['name']}" for o in objects],
            "pod_selector": topology.pod_selector,
            "unsupported": [n.source for n in result.report.of("unsupported")][:50],
        },
    )
    return topology


@transaction.atomic
def topology_release(*, topology: Topology, actor: Any, source_ip: str | None = None) -> list[str]:
    """Hand an adopted workload back: Tandem gives up its field ownership (its labels go; every value
    another manager set stays as it is) and forgets the topology. Returns the objects released."""
    locked = Topology.objects.select_for_update().select_related("cluster").get(pk=topology.pk)
    if not locked.adopted_from:
        raise DomainError(
            f"topology {locked.name} was created in Tandem, not adopted; delete it instead",
            code="not_adopted",
            fields={"topology": ["only adopted topologies can be released"]},
            status_code=409,
        )
    from deployments.selectors import active_deployment

    active = active_deployment(locked)
    if active is not None:
        raise Conflict(
            f"the {active.describe()} is running; wait for it or cancel it, then release",
            code="deployment_running",
        )
    conn = _conn(locked.cluster)
    objects = [
        *locked.adopted_from,
        *[
            {
                "apiVersion": o["apiVersion"],
                "kind": o["kind"],
                "namespace": o["metadata"].get("namespace"),
                "name": o["metadata"]["name"],
            }
            for o in (locked.deployed_revision.manifests if locked.deployed_revision else [])
        ],
    ]
    seen: set[tuple[str, str, str]] = set()
    released: list[str] = []
    try:
        for ref in objects:
            key = (ref["kind"], ref.get("namespace") or "", ref["name"])
            if key in seen:
                continue
            seen.add(key)
            body = adoption.release_body(
                {
                    "apiVersion": ref["apiVersion"],
                    "kind": ref["kind"],
                    "metadata": {"name": ref["name"], "namespace": ref.get("namespace")},
                }
            )
            if (
                kube.get_object(conn, ref["apiVersion"], ref["kind"], ref.get("namespace"), ref["name"])
                is None
            ):
                continue
            kube.apply_objects(conn, [body], force=False)
            released.append(f"{ref['kind']}/{ref['name']}")
    except kube.KubeError as error:
        raise _kube_error(error, f"cannot release {locked.name}") from None
    audit_record(
        action="topology.release",
        actor=actor,
        target=locked,
        source_ip=source_ip,
        detail={"objects": released, "cluster": locked.cluster.name},
    )
    locked.delete()
    return released
