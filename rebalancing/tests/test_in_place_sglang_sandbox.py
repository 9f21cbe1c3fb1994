"""Against the sandbox: SGLang (Mooncake) on Kthena switches an instance's role in place through
POST /pd_role_switch, under load from the workload generator, with no failed request, and back."""

from __future__ import annotations

import json
import uuid

import pytest

from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now
from kube.labels import ROLE, SERVING_ROLE
from rebalancing import selectors
from rebalancing.models import RebalanceKind, RebalanceState
from rebalancing.services import rebalance_switch_start
from rebalancing.services.inplace import rebalance_in_place_run
from rebalancing.tests.test_in_place_sandbox import engine, load, pods, router_url

pytestmark = pytest.mark.usefixtures("fast_deploys")


@pytest.fixture
def conn(lab):
    from clusters.selectors import cluster_connection

    return cluster_connection(lab)


@pytest.fixture
def sglang(lab, operator, conn, gpu_sandbox):
    from topologies.services import topology_create
    from topologies.tests.combinations import combination

    role = {
        "accelerator_resource": "nvidia.com/gpu",
        "accelerator_count": 1,
        "env": {"SANDBOX_TIME_SCALE": "0.5"},
    }
    spec = combination(
        "sglang",
        "mooncake",
        "kthena",
        namespace=f"sg{uuid.uuid4().hex[:8]}",
        roles={"prefill": {**role, "replicas": 1}, "decode": {**role, "replicas": 2}},
        rebalancing={
            "prefill": {"min": 1, "max": 3},
            "decode": {"min": 1, "max": 3},
            "accelerator_budget": 4,
        },
    )
    topology = topology_create(cluster=lab, spec=spec, actor=operator)
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    yield topology
    # Free the accelerators of the package's shared sandbox.
    import time

    import kube

    kinds = "modelroutes,modelservers,modelservings,services"
    gpu_sandbox.kubectl("delete", kinds, "--all", "-n", topology.namespace, "--wait=false")
    deadline = time.monotonic() + 30
    while kube.list_pods(conn, topology.namespace, "") and time.monotonic() < deadline:
        time.sleep(0.2)


def test_sglang_switches_in_place_under_load_and_back(sglang, conn, operator, gpu_sandbox):
    import time

    decodes = sorted(n for n, labels in pods(conn, sglang).items() if labels[ROLE] == "decode")
    victim = decodes[-1]
    url = router_url(gpu_sandbox, sglang.namespace)
    reports: list = []
    traffic = load(url, sglang.model_name, 12, reports)
    time.sleep(2)
    there = rebalance_switch_start(
        topology=sglang, instance=victim, target_role="prefill", actor=operator, source_ip=None
    )
    assert there.kind == RebalanceKind.SWITCH_IN_PLACE
    assert rebalance_in_place_run(rebalance_id=there.pk) == "succeeded"
    assert pods(conn, sglang)[victim][SERVING_ROLE] == "prefill"
    assert (
        engine(conn, sglang, victim, "/server_info")["internal_states"][0]["disaggregation_mode"] == "prefill"
    )
    assert selectors.effective_replicas(sglang) == (2, 1)
    time.sleep(2)  # prompts are prefilled on it now
    back = rebalance_switch_start(
        topology=sglang, instance=victim, target_role="decode", actor=operator, source_ip=None
    )
    assert rebalance_in_place_run(rebalance_id=back.pk) == "succeeded"
    traffic.join(60)
    [report] = reports
    assert report.sent >= 50 and report.failed == 0, (report.errors, report.table())
    there.refresh_from_db()
    steps = [s["message"] for s in there.log]
    order = ["Stopped routing", "Drained", "Switched", "Verified", "Resumed routing"]
    found = [next(i for i, m in enumerate(steps) if m.startswith(word)) for word in order]
    assert found == sorted(found), steps
    assert "POST /pd_role_switch" in steps[found[2]] and "no links are closed" in steps[found[2]]
    back.refresh_from_db()
    assert back.state == RebalanceState.SUCCEEDED, back.log
    assert pods(conn, sglang)[victim][SERVING_ROLE] == "decode"
    assert selectors.effective_replicas(sglang) == (1, 2)
    args = json.dumps(sglang.current_revision.manifests)
    assert "--enable-pd-role-switch" in args
