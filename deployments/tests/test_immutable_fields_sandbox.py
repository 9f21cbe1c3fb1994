"""A revision that changes an immutable field (ModelRoute modelName) deploys by delete-and-recreate,
recorded as a step, instead of failing with the API server's 422 halfway through."""

from __future__ import annotations

import pytest

import kube
from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now
from kube.immutable import immutable_changes
from topologies.services import topology_update

pytestmark = pytest.mark.usefixtures("fast_deploys")


def test_immutable_changes_name_the_field_and_both_values():
    live = {"kind": "ModelRoute", "spec": {"modelName": "qwen"}}
    assert immutable_changes(live, {"kind": "ModelRoute", "spec": {"modelName": "llama"}}) == [
        "spec.modelName 'qwen' → 'llama'"
    ]
    assert immutable_changes(live, {"kind": "ModelRoute", "spec": {"modelName": "qwen"}}) == []
    assert immutable_changes(None, {"kind": "ModelRoute", "spec": {"modelName": "x"}}) == []
    assert immutable_changes(live, {"kind": "ModelServer", "spec": {"model": "x"}}) == []


def test_changing_the_served_model_name_recreates_the_model_route(new_topology, operator, conn):
    topology = new_topology("qwen-gpu-nixl")
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    spec = dict(topology.spec)
    spec["routing"] = {**spec["routing"], "model_name": "qwen-renamed"}
    topology = topology_update(topology=topology, spec=spec, actor=operator, message="rename the model")

    job = deploy_now(topology, operator)

    assert job.state == State.SUCCEEDED, (job.error, job.diagnosis)
    route = next(o for o in topology.current_revision.manifests if o["kind"] == "ModelRoute")
    live = kube.get_object(
        conn, route["apiVersion"], "ModelRoute", topology.namespace, route["metadata"]["name"]
    )
    assert live["spec"]["modelName"] == "qwen-renamed"
    steps = [s.message for s in job.steps.all()]
    assert any("spec.modelName" in m and "immutable" in m and "created again" in m for m in steps), steps
