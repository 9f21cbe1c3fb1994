"""Against the sandbox: MindIE (LLM-DataDist) on Kthena switches an instance's role in place. Under load
from the workload generator no request fails; the switch stops routing to the instance, drains it,
unlinks, switches, re-links (decode initiating) and resumes routing, each step logged; the engine
refuses a switch with open links with LLM_EXIST_LINK and Tandem surfaces that code; a drain that
times out returns the instance to its old role."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid

import pytest

from controlplane.api.errors import Conflict
from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now, register
from kube.labels import ROLE, SERVING_ROLE, STAGED, topology_selector
from rebalancing import selectors
from rebalancing.models import RebalanceKind, RebalanceState, RoleOverride
from rebalancing.services import rebalance_switch_start
from rebalancing.services.inplace import instance_role_assign, rebalance_in_place_run
from rebalancing.tests.snapshots import prefill_short

pytestmark = pytest.mark.usefixtures("fast_deploys")

ENV = {"SANDBOX_TIME_SCALE": "0.5", "SANDBOX_LINK_SETUP_MS": "200", "SANDBOX_ROLE_SWITCH_MS": "600"}


@pytest.fixture(scope="module")
def ascend_sandbox():
    from sandbox.testing import SandboxCluster

    with SandboxCluster(nodes=2, accelerators=["huawei.com/ascend-1980=8"]) as sandbox:
        yield sandbox


@pytest.fixture
def conn(ascend_sandbox, db):
    from clusters.selectors import cluster_connection

    return cluster_connection(register(ascend_sandbox))


@contextlib.contextmanager
def mindie_topology(conn, operator, sandbox, prefill: int, decode: int, budget: int = 8):
    from clusters.models import Cluster
    from topologies.services import topology_create
    from topologies.tests.combinations import combination

    base = combination("mindie", "llm-datadist", "kthena")
    # The sandbox's MindIE reads its served model name from the environment, not the rendered config.json.
    env = {**ENV, "MINDIE_MODEL_NAME": base["model_name"]}
    role = {"accelerator_resource": "huawei.com/ascend-1980", "accelerator_count": 2, "env": env}
    spec = combination(
        "mindie",
        "llm-datadist",
        "kthena",
        namespace=f"ip{uuid.uuid4().hex[:8]}",
        roles={"prefill": {**role, "replicas": prefill}, "decode": {**role, "replicas": decode}},
        rebalancing={
            "prefill": {"min": 1, "max": 3},
            "decode": {"min": 1, "max": 3},
            "accelerator_budget": budget,
        },
    )
    topology = topology_create(cluster=Cluster.objects.get(pk=conn.cluster_id), spec=spec, actor=operator)
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    try:
        yield topology
    finally:
        # Free the accelerators for the next test's topology.
        import kube

        kinds = "modelroutes,modelservers,modelservings,services"
        sandbox.kubectl("delete", kinds, "--all", "-n", topology.namespace, "--wait=false")
        deadline = time.monotonic() + 30
        while kube.list_pods(conn, topology.namespace, "") and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture
def mindie(conn, operator, ascend_sandbox):
    with mindie_topology(conn, operator, ascend_sandbox, 1, 2) as topology:
        yield topology


def pods(conn, topology) -> dict[str, dict[str, str]]:
    import kube

    listed = kube.list_pods(conn, topology.namespace, topology_selector(topology.pk))
    return {p.name: p.labels for p in listed if p.ready and not p.deletion_pending}


def engine(conn, topology, pod: str, path: str) -> dict:
    import kube

    answer = kube.pod_proxy_get(conn, topology.namespace, pod, topology.spec["port"], path)
    assert answer.status == 200, answer.data
    return json.loads(answer.data)


def router_url(sandbox, namespace: str) -> str:
    out = sandbox.kubectl("get", "modelroutes", "-n", namespace, "-o", "json")
    return str(json.loads(out.stdout)["items"][0]["metadata"]["annotations"]["sandbox.tandem.io/router-url"])


def load(url: str, model: str, seconds: float, reports: list) -> threading.Thread:
    from sandbox.load.runner import run_load

    def run() -> None:
        reports.append(
            asyncio.run(run_load(url, model, rate=6, duration=seconds, prompt_tokens=96, max_tokens=24))
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_an_in_place_switch_under_load_fails_no_request(mindie, conn, operator, ascend_sandbox):
    before = pods(conn, mindie)
    [prefill] = [n for n, labels in before.items() if labels[ROLE] == "prefill"]
    decodes = sorted(n for n, labels in before.items() if labels[ROLE] == "decode")
    victim, other = decodes[-1], decodes[0]
    url = router_url(ascend_sandbox, mindie.namespace)

    # Traffic links the decodes to the prefill; a switch with those links open is refused by the
    # engine with LLM-DataDist's code, and Tandem says so.
    warm: list = []
    load(url, mindie.model_name, 2, warm).join(30)
    assert warm[0].failed == 0, warm[0].errors
    with pytest.raises(Conflict) as refused:
        instance_role_assign(topology=mindie, instance=victim, role="prefill", peers=[other])
    assert refused.value.code == "LLM_EXIST_LINK"
    assert prefill in refused.value.message

    reports: list = []
    traffic = load(url, mindie.model_name, 12, reports)
    time.sleep(2)
    rebalance = rebalance_switch_start(
        topology=mindie, instance=victim, target_role="prefill", actor=operator, source_ip=None
    )
    assert rebalance.kind == RebalanceKind.SWITCH_IN_PLACE
    assert rebalance_in_place_run(rebalance_id=rebalance.pk) == "succeeded"
    assert rebalance_in_place_run(rebalance_id=rebalance.pk) == "done"  # a second delivery does nothing
    traffic.join(60)
    [report] = reports
    assert report.sent >= 50 and report.failed == 0, (report.errors, report.table())

    rebalance.refresh_from_db()
    assert rebalance.state == RebalanceState.SUCCEEDED, rebalance.log
    steps = [s["message"] for s in rebalance.log]
    order = ["Stopped routing", "Drained", "Unlinked", "Switched", "Re-linked", "Verified", "Resumed routing"]
    found = [next(i for i, m in enumerate(steps) if m.startswith(word)) for word in order]
    assert found == sorted(found), steps
    assert f"{other} → {victim}" in next(m for m in steps if m.startswith("Re-linked"))

    after = pods(conn, mindie)
    assert (after[victim][SERVING_ROLE], after[victim][ROLE]) == ("prefill", "decode")
    # The sandbox's device plugin gave every pod its own NPUs with device IPs; MindIE's assignments
    # listed them (the sandbox's MindIE refuses an assignment without them).
    listed = json.loads(ascend_sandbox.kubectl("get", "pods", "-n", mindie.namespace, "-o", "json").stdout)
    held = {}
    for item in listed["items"]:
        config = json.loads(
            item["metadata"]["annotations"]["ascend.kubectl.kubernetes.io/ascend-910-configuration"]
        )
        assert config["pod_name"] == item["metadata"]["name"] and len(config["devices"]) == 2
        for device in config["devices"]:
            key = (item["spec"]["nodeName"], device["device_id"])
            assert key not in held and device["device_ip"], (key, held)
            held[key] = item["metadata"]["name"]
    status = engine(conn, mindie, victim, "/v1/status")
    assert status["service"] == {"roleStatus": "RoleReady", "currentRole": "prefill"}
    mindie.refresh_from_db()
    assert selectors.role_replicas(mindie.spec) == (1, 2)
    assert selectors.effective_replicas(mindie) == (2, 1)
    [override] = RoleOverride.objects.filter(topology=mindie)
    assert (override.pod, override.template_role, override.serving_role) == (victim, "decode", "prefill")

    # It serves: prompts are now prefilled on it and their KV pulled by the other decode.
    served: list = []
    load(url, mindie.model_name, 3, served).join(30)
    assert served[0].failed == 0, served[0].errors
    links = engine(conn, mindie, other, "/sandbox/kv/links")["links"]
    assert any(link["peer"] == victim and link["transfers"] > 0 for link in links), links


def test_a_drain_that_times_out_returns_the_instance_to_its_old_role(mindie, conn, operator, ascend_sandbox):
    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    victim = decodes[-1]
    url = router_url(ascend_sandbox, mindie.namespace)
    reports: list = []
    # Long generations keep requests on the instance longer than the 1 s drain bound.
    from sandbox.load.runner import run_load

    thread = threading.Thread(
        target=lambda: reports.append(
            asyncio.run(
                run_load(url, mindie.model_name, rate=4, duration=4, prompt_tokens=32, max_tokens=400)
            )
        ),
        daemon=True,
    )
    thread.start()
    time.sleep(1.5)
    rebalance = rebalance_switch_start(
        topology=mindie,
        instance=victim,
        target_role="prefill",
        actor=operator,
        source_ip=None,
        drain_timeout_seconds=1,
    )
    assert rebalance_in_place_run(rebalance_id=rebalance.pk) == "failed"
    thread.join(90)
    rebalance.refresh_from_db()
    assert rebalance.state == RebalanceState.FAILED
    assert "drain_timeout" in rebalance.error and f"{victim} serves decode again" in rebalance.error
    assert pods(conn, mindie)[victim][SERVING_ROLE] == "decode"
    assert engine(conn, mindie, victim, "/v1/status")["service"]["currentRole"] == "decode"
    assert reports[0].failed == 0, reports[0].errors
    assert not RoleOverride.objects.filter(topology=mindie).exists()


def test_switching_back_under_load_closes_the_decodes_links_first_and_ends_the_override(
    mindie, conn, operator, ascend_sandbox
):
    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    victim, other = decodes[-1], decodes[0]
    url = router_url(ascend_sandbox, mindie.namespace)
    first = rebalance_switch_start(
        topology=mindie, instance=victim, target_role="prefill", actor=operator, source_ip=None
    )
    assert rebalance_in_place_run(rebalance_id=first.pk) == "succeeded"
    reports: list = []
    traffic = load(url, mindie.model_name, 8, reports)
    time.sleep(2)  # the other decode now pulls KV from the switched instance
    back = rebalance_switch_start(
        topology=mindie, instance=victim, target_role="decode", actor=operator, source_ip=None
    )
    assert (back.from_prefill, back.from_decode, back.target_prefill, back.target_decode) == (2, 1, 1, 2)
    assert rebalance_in_place_run(rebalance_id=back.pk) == "succeeded"
    traffic.join(60)
    assert reports[0].sent >= 30 and reports[0].failed == 0, reports[0].errors
    back.refresh_from_db()
    steps = [s["message"] for s in back.log]
    unlinked = next(m for m in steps if m.startswith("Unlinked"))
    assert f"{other} closed theirs to it" in unlinked, steps
    assert any(m.startswith(f"Re-linked, decode initiating: {victim} → ") for m in steps), steps
    assert pods(conn, mindie)[victim][SERVING_ROLE] == "decode"
    assert not RoleOverride.objects.filter(topology=mindie).exists()
    assert selectors.effective_replicas(mindie) == (1, 2)


def test_a_re_link_that_fails_returns_the_switched_instance_to_its_old_role(
    mindie, conn, operator, ascend_sandbox, settings
):
    import kube

    settings.REBALANCE_STEP_TIMEOUT_SECONDS = 2
    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    victim, other = decodes[-1], decodes[0]
    # The other decode cannot set up a link to the switched instance.
    fault = kube.pod_proxy_post(
        conn,
        mindie.namespace,
        other,
        mindie.spec["port"],
        "/sandbox/faults",
        {"kind": "link_down", "peer": victim},
    )
    assert fault.status == 201, fault.data
    reports: list = []
    traffic = load(router_url(ascend_sandbox, mindie.namespace), mindie.model_name, 10, reports)
    time.sleep(1)
    rebalance = rebalance_switch_start(
        topology=mindie, instance=victim, target_role="prefill", actor=operator, source_ip=None
    )
    assert rebalance_in_place_run(rebalance_id=rebalance.pk) == "failed"
    traffic.join(60)
    rebalance.refresh_from_db()
    steps = [s["message"] for s in rebalance.log]
    assert "engine_not_ready" in rebalance.error and f"{victim} serves decode again" in rebalance.error, steps
    assert any(m.startswith(f"Switched {victim} decode → prefill") for m in steps), steps
    assert any(m.startswith(f"Switched {victim} prefill → decode") for m in steps), steps
    assert steps[-2] == f"Routing to {victim} as decode again", steps
    assert pods(conn, mindie)[victim][SERVING_ROLE] == "decode"
    status = engine(conn, mindie, victim, "/v1/status")
    assert status["service"] == {"roleStatus": "RoleReady", "currentRole": "decode"}
    assert all(peer["link"] == "ok" for peer in status["linkStatus"]["peers"]), status
    assert not RoleOverride.objects.filter(topology=mindie).exists()
    assert reports[0].failed == 0, reports[0].errors


def test_an_in_place_switch_is_not_drift(mindie, conn, operator):
    from deployments.services import topology_drift_check

    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    rebalance = rebalance_switch_start(
        topology=mindie, instance=decodes[-1], target_role="prefill", actor=operator, source_ip=None
    )
    assert rebalance_in_place_run(rebalance_id=rebalance.pk) == "succeeded"
    assert topology_drift_check(topology=mindie) == []
    mindie.refresh_from_db()
    assert mindie.drift_state == "in_sync"


def test_the_api_starts_an_in_place_switch_and_lists_its_steps(mindie, conn, operator, api_client):
    api_client.force_authenticate(operator)
    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    url = f"/api/v1/topologies/{mindie.pk}/switch-role/"
    bad = api_client.post(
        url, {"instance": decodes[-1], "target_role": "prefill", "drain_timeout_seconds": 0}
    )
    assert bad.status_code == 400 and "drain_timeout_seconds" in bad.json()["error"]["fields"]
    answer = api_client.post(
        url, {"instance": decodes[-1], "target_role": "prefill", "drain_timeout_seconds": 5}, format="json"
    )
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert (body["kind"], body["params"]["path"], body["params"]["drain_timeout_seconds"]) == (
        "switch_in_place",
        "in_place",
        5.0,
    )
    assert "drain (at most 5 s), unlink, switch, re-link" in body["log"][0]["message"]
    assert rebalance_in_place_run(rebalance_id=body["id"]) == "succeeded"
    listed = api_client.get(f"/api/v1/topologies/{mindie.pk}/rebalances/").json()["results"][0]
    assert listed["state"] == "succeeded" and listed["log"][-1]["message"].startswith("Resumed routing")


def test_set_the_ratio_switches_in_place_under_load_and_the_planner_switches_back(
    mindie, conn, operator, ascend_sandbox
):
    from rebalancing.services import rebalance_ratio_start

    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    url = router_url(ascend_sandbox, mindie.namespace)
    reports: list = []
    traffic = load(url, mindie.model_name, 12, reports)
    time.sleep(2)
    there = rebalance_ratio_start(topology=mindie, prefill=2, decode=1, actor=operator, source_ip=None)
    assert there.kind == RebalanceKind.RATIO and there.params["path"] == "in_place"
    assert there.params["switches"] == [
        {"instance": decodes[-1], "source_role": "decode", "target_role": "prefill"}
    ]
    assert rebalance_in_place_run(rebalance_id=there.pk) == "succeeded"
    assert selectors.effective_replicas(mindie) == (2, 1)

    # The planner's move back uses the same path and returns the switched pod to its template role.
    back = rebalance_ratio_start(
        topology=mindie, prefill=1, decode=2, actor=None, source_ip=None, kind=RebalanceKind.PLANNER
    )
    assert back.params["switches"][0]["instance"] == decodes[-1]
    assert rebalance_in_place_run(rebalance_id=back.pk) == "succeeded"
    traffic.join(60)
    [report] = reports
    assert report.sent >= 50 and report.failed == 0, (report.errors, report.table())

    for rebalance in (there, back):
        rebalance.refresh_from_db()
        assert rebalance.state == RebalanceState.SUCCEEDED, rebalance.log
        assert rebalance.deployments == []  # no scale job: nothing restarted, nothing added or removed
        steps = [s["message"] for s in rebalance.log]
        assert steps[0].startswith("Planned") and "in-place switch" in steps[0], steps
        assert any(m.startswith("Drained") for m in steps) and any(m.startswith("Re-linked") for m in steps)
    assert not RoleOverride.objects.filter(topology=mindie).exists()
    assert selectors.effective_replicas(mindie) == (1, 2)
    after = pods(conn, mindie)
    assert after[decodes[-1]][SERVING_ROLE] == "decode"
    assert engine(conn, mindie, decodes[-1], "/v1/status")["service"]["currentRole"] == "decode"


def test_a_ratio_change_of_several_instances_drains_them_together_and_switches_one_at_a_time(
    conn, operator, ascend_sandbox
):
    from rebalancing.services import rebalance_ratio_start

    with mindie_topology(conn, operator, ascend_sandbox, 1, 3) as topology:
        url = router_url(ascend_sandbox, topology.namespace)
        reports: list = []
        traffic = load(url, topology.model_name, 12, reports)
        time.sleep(2)
        change = rebalance_ratio_start(topology=topology, prefill=3, decode=1, actor=operator, source_ip=None)
        moved = [s["instance"] for s in change.params["switches"]]
        assert len(moved) == 2
        assert rebalance_in_place_run(rebalance_id=change.pk) == "succeeded"
        traffic.join(60)
        [report] = reports
        assert report.sent >= 50 and report.failed == 0, (report.errors, report.table())
        change.refresh_from_db()
        steps = [m["message"] for m in change.log]
        # Both out of routing first (their drains overlap), then each switched in turn.
        unrouted = next(i for i, m in enumerate(steps) if m.startswith("Stopped routing"))
        assert all(name in steps[unrouted] for name in moved) and "drain together" in steps[unrouted]
        switched = [i for i, m in enumerate(steps) if m.startswith("Switched")]
        verified = [i for i, m in enumerate(steps) if m.startswith("Verified")]
        assert len(switched) == len(verified) == 2 and unrouted < switched[0] < verified[0] < switched[1]
        assert change.next_move == 2 and change.deployments == []
        assert selectors.effective_replicas(topology) == (3, 1)
        assert {p: labels[SERVING_ROLE] for p, labels in pods(conn, topology).items() if p in moved} == {
            name: "prefill" for name in moved
        }


def test_pods_deployed_before_the_serving_role_label_are_not_switched_in_place(
    mindie, conn, operator, ascend_sandbox
):
    from rebalancing.services import rebalance_ratio_start

    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    # As a pod rendered before the label: the router's selector would still reach it after a relabel.
    ascend_sandbox.kubectl("label", "pod", decodes[-1], "-n", mindie.namespace, f"{SERVING_ROLE}-")
    with pytest.raises(Conflict) as refused:
        rebalance_switch_start(
            topology=mindie, instance=decodes[0], target_role="prefill", actor=operator, source_ip=None
        )
    assert refused.value.code == "redeploy_needed"
    assert (
        f"{decodes[-1]} was deployed before Tandem labelled the role each pod serves" in refused.value.message
    )
    assert "redeploy the topology, then switch in place" in refused.value.fields["instance"][0]
    # Set-the-ratio still works: by scale jobs, saying why not in place.
    rebalance = rebalance_ratio_start(topology=mindie, prefill=2, decode=1, actor=operator, source_ip=None)
    assert rebalance.kind == RebalanceKind.RATIO
    assert rebalance.moves == [{"role": "prefill", "replicas": 2}, {"role": "decode", "replicas": 1}]
    assert "(not in place: " in rebalance.log[0]["message"], rebalance.log
    assert not RoleOverride.objects.filter(topology=mindie).exists()


def test_a_switched_pod_whose_engine_restarts_is_routed_by_its_template_role_again(mindie, conn, operator):
    import kube
    from audit.models import AuditEvent
    from rebalancing.services import planner_tick_all
    from rebalancing.services.overrides import overrides_refresh

    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    victim = decodes[-1]
    rebalance = rebalance_switch_start(
        topology=mindie, instance=victim, target_role="prefill", actor=operator, source_ip=None
    )
    assert rebalance_in_place_run(rebalance_id=rebalance.pk) == "succeeded"
    assert RoleOverride.objects.get(topology=mindie, pod=victim).restarts == 0
    overrides_refresh(topology=mindie)  # nothing changed: the override stands
    assert selectors.effective_replicas(mindie) == (2, 1)

    # The engine crashes; the kubelet restarts it, and MindIE reads its role from config.json again.
    crash = kube.pod_proxy_post(
        conn, mindie.namespace, victim, mindie.spec["port"], "/sandbox/faults", {"kind": "crash"}
    )
    assert crash.status == 202, crash.data
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        [pod] = [p for p in kube.list_pods(conn, mindie.namespace, "") if p.name == victim]
        if pod.restarts and pod.ready:
            break
        time.sleep(0.5)
    assert pod.restarts >= 1 and pod.ready, pod
    assert engine(conn, mindie, victim, "/v1/status")["service"]["currentRole"] == "decode"

    planner_tick_all()  # the planner is off: its interval task still keeps the overrides true
    assert not RoleOverride.objects.filter(topology=mindie).exists()
    assert selectors.effective_replicas(mindie) == (1, 2)
    assert pods(conn, mindie)[victim][SERVING_ROLE] == "decode"
    event = AuditEvent.objects.filter(action="rebalancing.override_ended").latest("pk")
    assert f"{victim} restarted after its switch to prefill" in event.detail["text"]


def test_the_planner_stages_a_donor_ahead_of_its_move_and_the_move_switches_it_first(
    conn, operator, ascend_sandbox
):
    # The budget is full (3 instances of 2 NPUs): a move is one decode becoming a prefill.
    from telemetry import cache

    with mindie_topology(conn, operator, ascend_sandbox, 1, 2, budget=6) as topology:
        try:
            _stage_then_move(topology, conn, operator, ascend_sandbox)
        finally:
            cache.forget(topology.pk)  # Redis outlives the test database


def _stage_then_move(mindie, conn, operator, ascend_sandbox) -> None:
    from rebalancing.models import Decision, Outcome, PlannerMode, Rebalance
    from rebalancing.services import planner_config_set, planner_tick, planner_tick_all

    decodes = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")
    config = planner_config_set(
        topology=mindie,
        mode=PlannerMode.AUTO,
        params={"breach_intervals": 2, "prefill_tokens_per_s": 1000, "decode_tokens_per_s": 1000},
        min_ratio=None,
        max_ratio=None,
        actor=operator,
        source_ip=None,
    )
    url = router_url(ascend_sandbox, mindie.namespace)
    reports: list = []
    traffic = load(url, mindie.model_name, 10, reports)
    time.sleep(2)
    begin = time.time()

    # A pod the router reaches by its role label only (rendered before the serving-role label): nothing
    # can be staged, the decision says why, and no pod leaves routing.
    ascend_sandbox.kubectl("label", "pod", decodes[0], "-n", mindie.namespace, f"{SERVING_ROLE}-")
    prefill_short(mindie, waiting=8)
    refused = planner_tick(config=config, now=begin)
    assert (refused.rule, refused.outcome) == ("stage", Outcome.REFUSED)
    assert refused.outcome_detail.startswith(f"cannot stage the move: {decodes[0]} was deployed before")
    assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "decode"
    ascend_sandbox.kubectl("label", "pod", decodes[0], "-n", mindie.namespace, f"{SERVING_ROLE}=decode")
    prefill_short(mindie, waiting=0)
    assert planner_tick(config=config, now=begin + 5).rule == "steady"
    start = begin + 10

    # First interval of the breach: the decode the move would take leaves routing, nothing else changes.
    prefill_short(mindie, waiting=8)
    staged = planner_tick(config=config, now=start)
    assert (staged.rule, staged.action, staged.outcome) == ("stage", "stage_prefill", Outcome.STARTED)
    assert staged.outcome_detail == f"out of routing ahead of the move: {decodes[-1]}"
    assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "none"
    assert pods(conn, mindie)[decodes[-1]][STAGED] == "planner"
    assert not Rebalance.objects.filter(topology=mindie).exists()
    assert selectors.effective_replicas(mindie) == (1, 2)

    # The queue is gone at the next interval: the breach did not hold, the decode is routed again.
    prefill_short(mindie, waiting=0)
    dropped = planner_tick(config=config, now=start + 5)
    assert (dropped.rule, dropped.action) == ("unstage", "unstage"), dropped.explanation
    assert dropped.outcome_detail == f"routed again: {decodes[-1]}"
    assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "decode"
    assert STAGED not in pods(conn, mindie)[decodes[-1]]

    # Changing the planner's mode while a move is staged routes the staged pod again.
    prefill_short(mindie, waiting=8)
    assert planner_tick(config=config, now=start + 10).action == "stage_prefill"
    assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "none"
    for mode in (PlannerMode.ADVISORY, PlannerMode.AUTO):
        config = planner_config_set(
            topology=mindie,
            mode=mode,
            params=config.params,
            min_ratio=None,
            max_ratio=None,
            actor=operator,
            source_ip=None,
        )
        assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "decode"

    # Turned off while the API server refuses the relabel: the staged pod stays in the state, out of
    # routing, and is routed again once the server answers (the planner is off, nothing else ticks it).
    assert planner_tick(config=config, now=start + 10).action == "stage_prefill"
    ascend_sandbox.api_fault("http_5xx", method="PATCH", path=f"/api/v1/namespaces/{mindie.namespace}/pods")
    try:
        off = planner_config_set(
            topology=mindie, mode=PlannerMode.OFF, params=config.params, min_ratio=None, max_ratio=None,
            actor=operator, source_ip=None,
        )  # fmt: skip
    finally:
        ascend_sandbox.clear_api_faults()
    assert off.state == {"staged_pods": {decodes[-1]: "decode"}}
    assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "none"
    planner_tick_all()
    off.refresh_from_db()
    assert off.state == {}
    assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "decode"
    config = planner_config_set(
        topology=mindie, mode=PlannerMode.AUTO, params=config.params, min_ratio=None, max_ratio=None,
        actor=operator, source_ip=None,
    )  # fmt: skip

    # A breach that holds: staged at its first interval, moved at its second, the staged pod first.
    assert planner_tick(config=config, now=start + 10).action == "stage_prefill"
    moved = planner_tick(config=config, now=start + 15)
    assert moved.action == "move_to_prefill" and moved.outcome == Outcome.STARTED, moved.explanation
    assert "1 decode staged 5 s ago, toward 2P/1D" in moved.explanation
    rebalance = moved.rebalance
    assert rebalance.params["switches"] == [
        {"instance": decodes[-1], "source_role": "decode", "target_role": "prefill"}
    ]
    assert rebalance_in_place_run(rebalance_id=rebalance.pk) == "succeeded"
    traffic.join(60)
    [report] = reports
    assert report.sent >= 40 and report.failed == 0, (report.errors, report.table())
    assert pods(conn, mindie)[decodes[-1]][SERVING_ROLE] == "prefill"
    assert selectors.effective_replicas(mindie) == (2, 1)
    config.refresh_from_db()
    assert "staged_pods" not in config.state
    assert list(Decision.objects.filter(topology=mindie).values_list("rule", flat=True)) == [
        "demand_split",
        "stage",
        "stage",  # before the planner was turned off
        "stage",  # before the mode changed
        "unstage",
        "stage",
        "steady",
        "stage",  # refused
    ]

    # Pods the planner took out of routing for a staging that no longer holds them (a planner interval
    # that failed to record after the relabel leaves them so) are routed again by the next sweep, each as
    # the role it serves: the switched pod as prefill (its override), the other decode as its template's
    # role; the staging's mark goes with it. A pod out of routing without the mark (as a switch whose
    # restore failed leaves it) is not the planner's to route.
    from audit.models import AuditEvent

    [prefill] = [n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "prefill"]
    marked = [f"{SERVING_ROLE}=none", f"{STAGED}=planner", "--overwrite"]
    for name in (decodes[0], decodes[-1]):
        ascend_sandbox.kubectl("label", "pod", name, "-n", mindie.namespace, *marked)
    ascend_sandbox.kubectl(
        "label", "pod", prefill, "-n", mindie.namespace, f"{SERVING_ROLE}=none", "--overwrite"
    )
    prefill_short(mindie, waiting=0)
    planner_tick(config=config, now=start + 75)
    now_labels = pods(conn, mindie)
    assert now_labels[decodes[0]][SERVING_ROLE] == "decode" and STAGED not in now_labels[decodes[0]]
    assert now_labels[decodes[-1]][SERVING_ROLE] == "prefill" and STAGED not in now_labels[decodes[-1]]
    assert now_labels[prefill][SERVING_ROLE] == "none"
    routed = AuditEvent.objects.filter(action="rebalancing.unrouted_pod_routed").order_by("pk")
    assert sorted((e.detail["pod"], e.detail["role"]) for e in routed) == [
        (decodes[0], "decode"),
        (decodes[-1], "prefill"),
    ]
    assert "for a staged move that no longer holds it" in routed[0].detail["text"]


def test_a_planner_tick_holds_no_lock_while_the_api_server_is_slow(
    mindie, conn, operator, ascend_sandbox, transactional_db
):
    """The tick calls the Kubernetes API outside any transaction: an operator's change to the planner
    goes through while a tick waits on a slow API server (it waited for the tick before), and wins; a
    second tick of the same planner meanwhile does nothing."""
    from rebalancing.models import PlannerMode
    from rebalancing.services import planner_config_set
    from rebalancing.services.planner import planner_tick

    config = planner_config_set(
        topology=mindie, mode=PlannerMode.AUTO, params={}, min_ratio=None, max_ratio=None,
        actor=operator, source_ip=None,
    )  # fmt: skip
    decode = sorted(n for n, labels in pods(conn, mindie).items() if labels[ROLE] == "decode")[0]
    # an instance serving out of its template role: every tick checks it against the pods
    RoleOverride.objects.create(topology=mindie, pod=decode, template_role="decode", serving_role="prefill")
    ascend_sandbox.api_fault("latency", delay_ms=3000, path="/api/v1/namespaces", method="GET", count=3)
    ticked: list = []

    def run() -> None:
        try:
            ticked.append(planner_tick(config=config))
        except Exception as error:  # the assertion below shows it
            ticked.append(error)

    tick = threading.Thread(target=run)
    try:
        tick.start()
        time.sleep(0.5)  # the tick is now waiting on the API server
        assert planner_tick(config=config) is None  # claimed by the first
        started = time.monotonic()
        planner_config_set(
            topology=mindie, mode=PlannerMode.ADVISORY, params={}, min_ratio=None, max_ratio=None,
            actor=operator, source_ip=None,
        )  # fmt: skip
        took = time.monotonic() - started
        assert tick.is_alive(), f"the tick ended before the change (the API server was not slow): {ticked}"
    finally:
        tick.join(30)
        ascend_sandbox.clear_api_faults("latency")
    assert took < 1.5, took  # not held until the tick's API calls returned
    config.refresh_from_db()
    assert config.mode == PlannerMode.ADVISORY
    assert ticked and not isinstance(ticked[0], Exception), ticked
