"""Against the sandbox: a ratio change runs as planned one-at-a-time scale jobs; a restart-based role
switch under load from the workload generator fails no request, and the new instance is Ready before
the switched one is drained and removed; refusals say why."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from controlplane.api.errors import DomainError
from deployments import runner
from deployments.models import Deployment, State
from deployments.tests.sandbox_helpers import deploy_now
from rebalancing.models import RebalanceState
from rebalancing.services import rebalance_advance, rebalance_ratio_start, rebalance_switch_start

pytestmark = pytest.mark.usefixtures("fast_deploys")


def drive(rebalance):
    """Run the rebalance to its end in this process, as the advance task and a deploy worker would."""
    for _ in range(30):
        rebalance = rebalance_advance(rebalance=rebalance)
        if not rebalance.is_active:
            return rebalance
        assert rebalance.deployment_id is not None
        assert runner.run(rebalance.deployment_id, worker="test-worker") == "claimed"
    raise AssertionError(f"rebalance {rebalance.pk} did not finish: {rebalance.log}")


def roles(conn, topology) -> dict[str, list[str]]:
    import kube
    from kube.labels import ROLE, topology_selector

    out: dict[str, list[str]] = {}
    for pod in kube.list_pods(conn, topology.namespace, topology_selector(topology.pk)):
        if pod.ready and not pod.deletion_pending and pod.labels.get(ROLE) in ("prefill", "decode"):
            out.setdefault(pod.labels[ROLE], []).append(pod.name)
    return {k: sorted(v) for k, v in out.items()}


@pytest.fixture
def conn(lab):
    from clusters.selectors import cluster_connection

    return cluster_connection(lab)


def test_a_ratio_change_runs_as_planned_scale_jobs(sandbox_topology, operator, conn):
    topology = sandbox_topology(budget=4)
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    rebalance = rebalance_ratio_start(topology=topology, prefill=2, decode=2, actor=operator, source_ip=None)
    assert rebalance.moves == [{"role": "prefill", "replicas": 2}, {"role": "decode", "replicas": 2}]
    done = drive(rebalance)
    assert done.state == RebalanceState.SUCCEEDED, done.log
    jobs = list(Deployment.objects.filter(pk__in=done.deployments).order_by("pk"))
    assert [(j.params["role"], j.params["replicas"], j.state) for j in jobs] == [
        ("prefill", 2, State.SUCCEEDED),
        ("decode", 2, State.SUCCEEDED),
    ]
    assert jobs[0].finished <= jobs[1].created, "the second move started before the first was Ready"
    ready = roles(conn, topology)
    assert (len(ready["prefill"]), len(ready["decode"])) == (2, 2)
    topology.refresh_from_db()
    assert topology.spec["roles"]["prefill"]["replicas"] == topology.spec["roles"]["decode"]["replicas"] == 2
    assert "Reached 2P/2D" in done.log[-1]["message"]


def test_refusals_say_why(sandbox_topology, operator, conn):
    topology = sandbox_topology(budget=3)
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    with pytest.raises(DomainError) as over:
        rebalance_ratio_start(topology=topology, prefill=2, decode=2, actor=operator, source_ip=None)
    assert "over the budget of 3" in over.value.message
    with pytest.raises(DomainError) as bounds:
        rebalance_ratio_start(topology=topology, prefill=4, decode=1, actor=operator, source_ip=None)
    assert "outside the rebalancing bounds 1..3" in bounds.value.fields["prefill"][0]
    decode = roles(conn, topology)["decode"][0]
    with pytest.raises(DomainError) as minimum:
        rebalance_switch_start(
            topology=topology, instance=decode, target_role="prefill", actor=operator, source_ip=None
        )
    assert minimum.value.code == "below_minimum"
    running = rebalance_ratio_start(topology=topology, prefill=2, decode=1, actor=operator, source_ip=None)
    with pytest.raises(DomainError) as busy:
        rebalance_ratio_start(topology=topology, prefill=1, decode=2, actor=operator, source_ip=None)
    assert busy.value.code == "rebalance_busy" and f"rebalance #{running.pk}" in busy.value.message
    drive(running)


def _router_url(sandbox, namespace: str) -> str:
    out = sandbox.kubectl("get", "modelroutes", "-n", namespace, "-o", "json")
    items = json.loads(out.stdout)["items"]
    return str(items[0]["metadata"]["annotations"]["sandbox.tandem.io/router-url"])


def test_a_restart_based_switch_under_load_fails_no_request(sandbox_topology, operator, conn, gpu_sandbox):
    from sandbox.load.runner import run_load

    # Model loading takes 2 s on every new instance, so the order of the moves is observable.
    topology = sandbox_topology(budget=4, replicas=(1, 2), env={"SANDBOX_STARTUP_SECONDS": "2"})
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    before = roles(conn, topology)
    victim = before["decode"][-1]
    with pytest.raises(DomainError) as wrong:
        rebalance_switch_start(
            topology=topology,
            instance=before["decode"][0],
            target_role="prefill",
            actor=operator,
            source_ip=None,
        )
    assert wrong.value.code == "instance_not_removable" and victim in wrong.value.message

    url = _router_url(gpu_sandbox, topology.namespace)
    reports = []
    load = threading.Thread(
        target=lambda: reports.append(
            asyncio.run(
                run_load(url, topology.model_name, rate=4, duration=14, prompt_tokens=64, max_tokens=24)
            )
        ),
        daemon=True,
    )
    load.start()
    rebalance = rebalance_switch_start(
        topology=topology, instance=victim, target_role="prefill", actor=operator, source_ip=None
    )
    done = drive(rebalance)
    load.join(60)
    assert done.state == RebalanceState.SUCCEEDED, done.log
    [report] = reports
    assert report.sent >= 40 and report.failed == 0, (report.errors, report.table())
    after = roles(conn, topology)
    assert victim not in after["decode"] and len(after["decode"]) == 1 and len(after["prefill"]) == 2
    first, second = Deployment.objects.filter(pk__in=done.deployments).order_by("pk")
    assert (first.params["role"], second.params["role"]) == ("prefill", "decode")
    assert first.finished <= second.created, "the old instance was removed before the new one was Ready"
    messages = [step["message"] for step in done.log]
    assert any("restart-based" in m and "vLLM sets kv_role at start-up" in m for m in messages)
    assert any(
        f"{victim} stops taking requests, drains its in-flight ones, and is removed" in m for m in messages
    )
