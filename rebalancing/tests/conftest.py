"""Fixtures for rebalancing tests: a topology (qwen-gpu-nixl: vLLM, 1 GPU per instance, budget 4) and a way
to give it a telemetry snapshot as the collector would store it."""

from __future__ import annotations

import time
import uuid

import pytest
from django.utils import timezone

NOWHERE = "http://127.0.0.1:9"  # the unit tests' cluster: nothing listens there


@pytest.fixture
def cluster(db):
    from clusters.models import Cluster

    return Cluster.objects.create(name="lab", auth_method="token", server=NOWHERE)


@pytest.fixture(autouse=True)
def nothing_else_scales_nowhere(monkeypatch):
    """The planner asks the cluster who else sets the replicas before auto starts and on every tick. The unit
    tests' cluster has no API server; for it, the edge answers as an empty namespace would (no workload live,
    no autoscaler). Sandbox clusters are asked for real."""
    import kube

    real = kube.replica_owners

    def replica_owners(conn, namespace, workloads):
        if conn.server == NOWHERE:
            return kube.OwnerReadout(workloads={key: None for key in workloads}, autoscalers=[])
        return real(conn, namespace, workloads)

    monkeypatch.setattr(kube, "replica_owners", replica_owners)


def _spec(
    budget: int = 4,
    replicas: tuple[int, int] = (1, 1),
    namespace: str = "default",
    env: dict | None = None,
    slo: tuple[int, int] = (1500, 50),
):
    from topologies.presets import preset_spec

    spec = preset_spec("qwen-gpu-nixl", namespace=namespace, name=f"t{uuid.uuid4().hex[:8]}")
    spec["roles"]["prefill"]["replicas"], spec["roles"]["decode"]["replicas"] = replicas
    spec["rebalancing"]["accelerator_budget"] = budget
    spec["slo"] = {"ttft_ms": slo[0], "tbt_ms": slo[1]}
    for role in ("prefill", "decode"):
        spec["roles"][role]["env"] = {**spec["roles"][role].get("env", {}), **(env or {})}
    return spec


@pytest.fixture
def make_topology(db, cluster, operator):
    from topologies.services import topology_create

    def make(*, on=None, deployed: bool = True, **kw):
        from telemetry import cache

        topology = topology_create(cluster=on or cluster, spec=_spec(**kw), actor=operator)
        cache.forget(topology.pk)  # ids restart with each test database; Redis outlives it
        if deployed:
            from topologies.models import Topology

            Topology.objects.filter(pk=topology.pk).update(deployed_revision=topology.current_revision)
            topology.refresh_from_db()
        return topology

    return make


@pytest.fixture
def snapshot():
    """Store a snapshot for a topology as the telemetry collector does (Redis + database)."""
    from telemetry import cache
    from telemetry.models import LatestSnapshot
    from telemetry.snapshot import empty_snapshot

    stored: list[int] = []

    def put(topology, *, ttft_ms=None, tbt_ms=None, prefill_waiting=0.0, links=None):
        snap = empty_snapshot(topology.pk, time.time(), 2.0, "test")
        snap["health"] = {"state": "healthy", "reasons": []}
        snap["slo"] = {
            "ttft_ms": 1500,
            "tbt_ms": 50,
            "ttft_p95_ms": ttft_ms,
            "tbt_p95_ms": tbt_ms,
            "state": "violated" if (ttft_ms or 0) > 1500 else "ok",
        }
        role = dict(snap["totals"])
        snap["roles"] = {
            "prefill": {**role, "pods": 1, "ready": 1, "waiting": prefill_waiting},
            "decode": {**role, "pods": 1, "ready": 1},
        }
        snap["links"] = links or []
        cache.set_snapshot(snap)
        stored.append(topology.pk)
        LatestSnapshot.objects.update_or_create(
            topology_id=topology.pk, defaults={"ts": timezone.now(), "data": snap}
        )
        return snap

    yield put
    for pk in stored:
        cache.forget(pk)


@pytest.fixture(scope="package")
def gpu_sandbox():
    from sandbox.testing import SandboxCluster

    with SandboxCluster(nodes=2, accelerators=["nvidia.com/gpu=8"]) as sandbox:
        yield sandbox


@pytest.fixture
def lab(gpu_sandbox, db):
    from deployments.tests.sandbox_helpers import register

    return register(gpu_sandbox)


@pytest.fixture
def sandbox_topology(lab, operator):
    from topologies.services import topology_create

    def make(**kw):
        return topology_create(
            cluster=lab, spec=_spec(namespace=f"r{uuid.uuid4().hex[:8]}", **kw), actor=operator
        )

    return make


@pytest.fixture
def fast_deploys(settings):
    settings.DEPLOY_POLL_SECONDS = 0.2
    settings.DEPLOY_FAIL_FAST_SECONDS = 2
    settings.DEPLOY_READY_TIMEOUT_SECONDS = 60
