"""Against the sandbox: scaling a role, or changing one role's template, leaves the other role's pods be."""

from __future__ import annotations

import pytest

from deployments.models import State
from deployments.selectors import topology_pods
from deployments.tests.sandbox_helpers import deploy_now, pod_uids, ready_pods

pytestmark = pytest.mark.usefixtures("fast_deploys")
BACKENDS = ["kthena", "deployments"]


def _by_role(uids: dict[str, str], conn, topology) -> dict[str, dict[str, str]]:
    import kube
    from kube.labels import ROLE, topology_selector

    roles = {
        p.name: p.labels.get(ROLE, "")
        for p in kube.list_pods(conn, topology.namespace, topology_selector(topology.pk))
    }
    out: dict[str, dict[str, str]] = {}
    for name, uid in uids.items():
        out.setdefault(roles.get(name, ""), {})[name] = uid
    return out


def _running(new_topology, operator, backend: str):
    topology = new_topology(backend=backend)
    first = deploy_now(topology, operator)
    assert first.state == State.SUCCEEDED, (first.error, first.diagnosis)
    return topology


@pytest.mark.parametrize("backend", BACKENDS)
def test_scaling_decode_adds_a_pod_and_restarts_none(new_topology, operator, conn, backend):
    from deployments import runner
    from deployments.services import topology_scale_start

    topology = _running(new_topology, operator, backend)
    before = _by_role(pod_uids(conn, topology), conn, topology)
    assert len(before["prefill"]) == len(before["decode"]) == 1
    deployment = topology_scale_start(
        topology=topology, role="decode", replicas=2, actor=operator, source_ip=None
    )
    assert runner.run(deployment.pk, worker="test-worker") == "claimed"
    deployment.refresh_from_db()
    topology.refresh_from_db()
    assert deployment.state == State.SUCCEEDED, (deployment.error, deployment.diagnosis)
    assert topology.deployed_revision.number == 2
    after = _by_role(pod_uids(conn, topology), conn, topology)
    assert after["prefill"] == before["prefill"], "the prefill pod was replaced by a decode scale"
    assert {n: after["decode"].get(n) for n in before["decode"]} == before["decode"], "decode-0 was replaced"
    [added] = set(after["decode"]) - set(before["decode"])
    assert after.get("router") == before.get("router"), "the router was replaced by a decode scale"
    ready = {p.name for p in ready_pods(conn, topology, 2)}
    assert added in ready and ready == {name for pods in after.values() for name in pods}
    assert deployment.pods_ready == deployment.pods_total == len(ready) == (3 if backend == "kthena" else 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_extra_argument_on_prefill_rolls_prefill_only(new_topology, operator, conn, backend):
    from topologies.services import topology_update

    topology = _running(new_topology, operator, backend)
    before = _by_role(pod_uids(conn, topology), conn, topology)
    spec = dict(topology.spec)
    spec["roles"]["prefill"]["extra_args"] = ["--max-model-len", "4096"]
    topology_update(topology=topology, spec=spec, actor=operator, message="longer context on prefill")
    deployment = deploy_now(topology, operator)
    assert deployment.state == State.SUCCEEDED, (deployment.error, deployment.diagnosis)
    after = _by_role(pod_uids(conn, topology), conn, topology)
    assert after["decode"] == before["decode"], "the decode pod was replaced by a prefill-only change"
    assert len(after["prefill"]) == 1 and set(after["prefill"].values()).isdisjoint(
        before["prefill"].values()
    )
    assert after.get("router") == before.get("router")
    assert {p.name for p in ready_pods(conn, topology, 2)} == {
        name for pods in after.values() for name in pods
    }
    rows = [r for r in topology_pods(topology) if r["state"] != "terminating"]
    assert {r["revision"] for r in rows} == {"2"} and {r["state"] for r in rows} == {"ready"}
