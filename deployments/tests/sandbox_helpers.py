"""Shared helpers for deployment tests against a real sandbox cluster."""

from __future__ import annotations

import copy
from typing import Any

from deployments import runner
from deployments.models import Deployment, Kind
from deployments.services import deployment_start


def register(sandbox, name: str = "sandbox"):
    from clusters.services import cluster_register

    return cluster_register(name=name, server=sandbox.server, token=sandbox.token)


def deploy_now(topology, actor, *, revision=None, kind: str = Kind.DEPLOY) -> Deployment:
    """Start a deployment and run it to its final state in this process (as a worker would)."""
    deployment = deployment_start(
        topology=topology, revision=revision, kind=kind, actor=actor, source_ip=None
    )
    assert runner.run(deployment.pk, worker="test-worker") == "claimed"
    deployment.refresh_from_db()
    topology.refresh_from_db()
    return deployment


def ready_pods(sandbox_cluster_conn, topology, revision: int) -> list[Any]:
    import kube
    from kube.labels import REVISION, topology_selector

    selector = f"{topology_selector(topology.pk)},{REVISION}={revision}"
    pods = kube.list_pods(sandbox_cluster_conn, topology.namespace, selector)
    return [p for p in pods if p.ready and not p.deletion_pending]


def revision_with_manifests(topology, mutate, message: str):
    """A new revision whose spec passes preflight but whose objects carry a fault the spec cannot express
    (as when the cluster changes between preflight and start)."""
    from topologies.models import Revision

    base = topology.current_revision
    manifests = copy.deepcopy(base.manifests)
    number = base.number + 1
    for obj in manifests:
        _relabel(obj, number)
        mutate(obj)
    revision = Revision.objects.create(
        topology=topology, number=number, spec=base.spec, manifests=manifests, message=message
    )
    topology.current_revision = revision
    topology.save(update_fields=["current_revision"])
    return revision


def _relabel(node: Any, number: int) -> None:
    if isinstance(node, dict):
        labels = node.get("labels")
        if isinstance(labels, dict) and "tandem.io/revision" in labels:
            labels["tandem.io/revision"] = str(number)
        for value in node.values():
            _relabel(value, number)
    elif isinstance(node, list):
        for item in node:
            _relabel(item, number)


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj.get("kind") == "ModelServing":
        roles = obj["spec"]["template"]["roles"]
        return [r[key] for r in roles for key in ("entryTemplate", "workerTemplate") if r.get(key)]
    if obj.get("kind") == "Deployment":
        return [obj["spec"]["template"]]
    return []
