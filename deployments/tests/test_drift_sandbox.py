"""Drift against a real sandbox: a kubectl change is found, named in words, and undone by re-apply."""

from __future__ import annotations

import pytest

from deployments.models import Kind, State
from deployments.tasks import check_drift
from deployments.tests.sandbox_helpers import deploy_now

pytestmark = pytest.mark.usefixtures("fast_deploys")


def test_kubectl_scale_is_drift_and_reapply_brings_it_back(new_topology, operator, lab_sandbox):
    topology = new_topology()
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    assert check_drift() == 0
    topology.refresh_from_db()
    assert topology.drift_state == "in_sync"

    name = topology.current_revision.manifests[0]["metadata"]["name"]
    scaled = lab_sandbox.kubectl("scale", f"modelserving/{name}", "--replicas=2", "-n", topology.namespace)
    assert scaled.returncode == 0, scaled.stderr
    assert check_drift() == 1
    topology.refresh_from_db()
    assert topology.drift_state == "drifted"
    assert topology.drift_detail["differences"] == [f"ModelServing/{name}: spec.replicas live 2, desired 1"]

    reapply = deploy_now(topology, operator, kind=Kind.REAPPLY)
    assert reapply.state == State.SUCCEEDED, (reapply.error, reapply.diagnosis)
    assert check_drift() == 0
    topology.refresh_from_db()
    assert topology.drift_state == "in_sync" and topology.drift_detail["differences"] == []


def test_deleted_object_is_drift(new_topology, operator, lab_sandbox):
    topology = new_topology("qwen-gpu-nixl")
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    route = next(o for o in topology.current_revision.manifests if o["kind"] == "ModelRoute")
    name = route["metadata"]["name"]
    deleted = lab_sandbox.kubectl("delete", f"modelroute/{name}", "-n", topology.namespace)
    assert deleted.returncode == 0, deleted.stderr
    check_drift()
    topology.refresh_from_db()
    assert f"ModelRoute/{name}: missing from the cluster" in topology.drift_detail["differences"]
