"""For tests that drive collection themselves instead of Celery beat."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings

import kube
from kube.labels import TOPOLOGY
from telemetry import services
from telemetry.snapshot import TopologySnapshot

if TYPE_CHECKING:
    from kube.client import ClusterConnection
    from topologies.models import Topology


def collect_intervals(topology_id: int, count: int) -> list[TopologySnapshot]:
    """Collect ``count`` times an interval apart, as beat does: a collection takes the link probes
    that ended since the one before (``telemetry.linkinputs``), so back-to-back collections would see
    a probe later than the product does."""
    snapshots = []
    for turn in range(count):
        if turn:
            time.sleep(float(settings.TELEMETRY_INTERVAL_SECONDS))
        snapshot = services.telemetry_collect(topology_id=topology_id)
        assert snapshot is not None, f"topology {topology_id} is not deployed"
        snapshots.append(snapshot)
    return snapshots


@dataclass
class Deployed:
    """A P/D topology applied to a sandbox cluster, its prefill and decode pods Ready, marked deployed."""

    topology: Topology
    conn: ClusterConnection
    namespace: str
    pods: list[kube.PodInfo]

    def of_role(self, role: str) -> list[kube.PodInfo]:
        return [p for p in self.pods if _role(p) == role]


def _role(pod: kube.PodInfo) -> str | None:
    return pod.labels.get("tandem.io/role") or pod.labels.get("modelserving.volcano.sh/role")


def deploy_ready(
    sandbox_cluster: Any, operator: Any, *, prefix: str, spec: dict[str, Any] | None = None
) -> Deployed:
    """Register the sandbox cluster, create the topology (``spec``, else the Ascend Mooncake preset) in
    a new namespace named ``prefix``…, apply it as a deploy would and wait up to 60 s for a Ready
    prefill and decode."""
    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = cluster_register(
        name=f"sbx-{uuid.uuid4().hex[:6]}", server=sandbox_cluster.server, token=sandbox_cluster.token
    )
    namespace = f"{prefix}{uuid.uuid4().hex[:8]}"
    spec = {**(spec or preset_spec("deepseek-ascend-mooncake")), "namespace": namespace}
    topology = topology_create(cluster=cluster, spec=spec, actor=operator)
    conn = cluster_connection(cluster)
    kube.apply_objects(conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    revision = topology.current_revision
    assert revision is not None
    kube.apply_objects(conn, revision.manifests)
    topology.deployed_revision = revision
    topology.save(update_fields=["deployed_revision"])
    deadline = time.monotonic() + 60
    pods: list[kube.PodInfo] = []
    while time.monotonic() < deadline:
        pods = [p for p in kube.list_pods(conn, namespace, f"{TOPOLOGY}={topology.pk}") if p.ready]
        if {"prefill", "decode"} <= {_role(p) for p in pods}:
            return Deployed(topology, conn, namespace, pods)
        time.sleep(0.2)
    pytest.fail(f"prefill and decode pods not Ready in 60 s: {pods}")


def undeploy(sandbox_cluster: Any, namespace: str) -> None:
    """Delete what a deploy applied in ``namespace`` (not waiting for the pods to go)."""
    kinds = "modelroutes,modelservers,modelservings,deployments,services"
    sandbox_cluster.kubectl("delete", kinds, "--all", "-n", namespace, "--wait=false")
