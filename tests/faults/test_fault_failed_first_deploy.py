"""A first deploy whose ModelServer the cluster refuses (422) after the ModelServing was applied: the
ModelServing and its pods (holding accelerators) are removed, the deployment says so, and nothing is left
running with no deployed revision; a deploy policy that keeps failed first deploys leaves them."""

from __future__ import annotations

import time

import pytest

from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now, revision_with_manifests
from tests.faults.sandbox_fixtures import *  # noqa: F403

pytestmark = pytest.mark.usefixtures("fast_deploys")


def _break_model_server(obj):
    if obj.get("kind") == "ModelServer":
        obj["spec"]["workloadPort"] = {"port": "eighty"}  # the CRD's schema wants an integer: 422


def _live(conn, topology):
    import kube
    from kube.labels import topology_selector

    found = {}
    for api_version, kind in (
        ("workload.serving.volcano.sh/v1alpha1", "ModelServing"),
        ("networking.serving.volcano.sh/v1alpha1", "ModelServer"),
        ("networking.serving.volcano.sh/v1alpha1", "ModelRoute"),
    ):
        items = kube.list_objects(
            conn, api_version, kind, topology.namespace, label_selector=topology_selector(topology.pk)
        )
        found[kind] = [i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")]
    return found


def _pods(conn, topology):
    import kube
    from kube.labels import topology_selector

    return [p for p in kube.list_pods(conn, topology.namespace, topology_selector(topology.pk))]


def test_failed_first_deploy_removes_the_model_serving_it_applied(new_topology, operator, conn):
    topology = new_topology("deepseek-ascend-mooncake")
    revision_with_manifests(topology, _break_model_server, "ModelServer the cluster refuses")
    deployment = deploy_now(topology, operator)

    assert deployment.state == State.FAILED
    assert deployment.diagnosis[0]["code"] == "apply_refused"
    assert "workloadPort" in deployment.error
    messages = [s.message for s in deployment.steps.order_by("pk")]
    assert any(m.startswith("Removed ") and "ModelServing/" in m for m in messages), messages
    assert "removed the" in messages[-1] and "no earlier good revision" in messages[-1]
    assert topology.deployed_revision is None
    assert _live(conn, topology) == {"ModelServing": [], "ModelServer": [], "ModelRoute": []}
    deadline = time.monotonic() + 20
    while _pods(conn, topology) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _pods(conn, topology) == [], "pods of the failed first deploy still hold accelerators"


def test_deploy_policy_can_keep_a_failed_first_deploy_for_inspection(new_topology, operator, conn):
    from deployments.services import deploy_policy_set

    topology = new_topology("deepseek-ascend-mooncake")
    deploy_policy_set(
        topology=topology,
        ready_timeout_seconds=None,
        auto_rollback=None,
        keep_failed_first_deploy=True,
        actor=operator,
        source_ip=None,
    )
    revision_with_manifests(topology, _break_model_server, "ModelServer the cluster refuses")
    deployment = deploy_now(topology, operator)

    assert deployment.state == State.FAILED
    assert "kept for inspection" in [s.message for s in deployment.steps.order_by("pk")][-1]
    assert len(_live(conn, topology)["ModelServing"]) == 1
