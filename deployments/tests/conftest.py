"""Fixtures for deployment tests: a registered cluster and a topology built from a seed preset."""

from __future__ import annotations

import time
import uuid

import pytest

from deployments.tests.sandbox_helpers import register


@pytest.fixture
def cluster(db, settings):
    """A cluster that refuses connections. No retries against it (the Kubernetes call deadline leaves no room
    for one), so preflight on the page and the deploy API learns "unreachable" at once, not after ~1.3 s
    of backoff."""
    from clusters.models import Cluster

    settings.KUBE_CALL_DEADLINE_SECONDS = 1.0
    return Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")


@pytest.fixture
def make_topology(db, cluster, admin_user):
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    def make(preset: str = "deepseek-ascend-mooncake", *, on=None, **overrides):
        return topology_create(cluster=on or cluster, spec=preset_spec(preset, **overrides), actor=admin_user)

    return make


@pytest.fixture
def topology(make_topology):
    return make_topology()


# A sandbox with both accelerator kinds, so every seed preset (Ascend and GPU) can deploy.
@pytest.fixture(scope="package")
def lab_sandbox():
    from sandbox.testing import SandboxCluster

    with SandboxCluster(nodes=4, accelerators=["huawei.com/ascend-1980=8", "nvidia.com/gpu=8"]) as cluster:
        yield cluster


@pytest.fixture
def fast_deploys(settings):
    settings.DEPLOY_POLL_SECONDS = 0.2
    settings.DEPLOY_FAIL_FAST_SECONDS = 2
    settings.DEPLOY_READY_TIMEOUT_SECONDS = 60


@pytest.fixture
def lab(lab_sandbox, db):
    return register(lab_sandbox)


@pytest.fixture
def conn(lab):
    from clusters.selectors import cluster_connection

    return cluster_connection(lab)


@pytest.fixture
def new_topology(lab, operator, lab_sandbox, conn):
    """Topologies in their own namespaces; their cluster objects are removed afterwards so the shared
    sandbox has its accelerators free for the next test."""
    import kube
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    namespaces: list[str] = []

    def make(preset: str = "deepseek-ascend-mooncake", **overrides):
        namespace = f"t{uuid.uuid4().hex[:8]}"
        namespaces.append(namespace)
        spec = preset_spec(preset, namespace=namespace, **overrides)
        return topology_create(cluster=lab, spec=spec, actor=operator)

    yield make
    kinds = "modelroutes,modelservers,modelservings,deployments,services"
    for namespace in namespaces:
        lab_sandbox.kubectl("delete", kinds, "--all", "-n", namespace, "--wait=false")
    deadline = time.monotonic() + 30
    while namespaces and time.monotonic() < deadline:
        namespaces = [ns for ns in namespaces if kube.list_pods(conn, ns, "")]
        time.sleep(0.2)
    assert not namespaces, f"pods still running in {namespaces} after cleanup"


@pytest.fixture
def after_auto_rollback(topology, operator):
    """r1 and r2 ran; r3 (a broken image) failed and was rolled back: desired r3, running r2."""
    from deployments.tests.rollback_helpers import auto_rolled_back

    return auto_rolled_back(topology, operator)
