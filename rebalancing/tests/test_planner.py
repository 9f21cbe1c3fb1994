"""The planner's tick: advisory records and changes nothing, auto starts a move, links down hold, decisions
are stored with their inputs and shown on the topology's time axis."""

from __future__ import annotations

import time

from deployments.models import Deployment, Kind
from rebalancing.models import Decision, Outcome, PlannerMode, Rebalance
from rebalancing.services import planner_config_set, planner_tick


def _planner(topology, operator, mode, **params):
    return planner_config_set(
        topology=topology,
        mode=mode,
        params={"breach_intervals": 2, **params},
        min_ratio=None,
        max_ratio=None,
        actor=operator,
        source_ip=None,
    )


def _ticks(config, count, start=None):
    start = start or time.time()
    return [planner_tick(config=config, now=start + 5 * i) for i in range(count)]


def test_advisory_records_what_it_would_do_and_changes_nothing(make_topology, snapshot, operator):
    topology = make_topology(budget=3)
    config = _planner(topology, operator, PlannerMode.ADVISORY)
    snapshot(topology, ttft_ms=2400, tbt_ms=20)
    _ticks(config, 3)
    advised = Decision.objects.filter(topology=topology, outcome=Outcome.ADVISED)
    assert advised.count() == 1
    decision = advised.get()
    assert decision.action == "add_prefill" and (decision.to_prefill, decision.to_decode) == (2, 1)
    assert decision.inputs["observation"]["ttft_p95_ms"] == 2400
    assert "TTFT p95 2.40 s > 1.50 s target for 2 intervals" in decision.explanation
    topology.refresh_from_db()
    assert topology.spec["roles"]["prefill"]["replicas"] == 1
    assert not Deployment.objects.filter(topology=topology).exists()
    assert not Rebalance.objects.filter(topology=topology).exists()


def test_auto_starts_a_scale_job_toward_the_breached_role(make_topology, snapshot, operator):
    topology = make_topology(budget=3)
    config = _planner(topology, operator, PlannerMode.AUTO)
    snapshot(topology, ttft_ms=2400, tbt_ms=20)
    _ticks(config, 2)
    decision = Decision.objects.filter(topology=topology).first()
    assert decision.outcome == Outcome.STARTED and decision.rebalance is not None
    deployment = Deployment.objects.get(topology=topology)
    assert deployment.kind == Kind.SCALE and deployment.params["role"] == "prefill"
    assert deployment.params["replicas"] == 2
    # while it runs, the planner holds
    later = planner_tick(config=config, now=time.time() + 20)
    assert later is None or later.rule == "busy"


def test_at_full_budget_the_move_is_opposing_and_stays_within_it(make_topology, snapshot, operator):
    topology = make_topology(budget=4, replicas=(1, 3))
    config = _planner(topology, operator, PlannerMode.AUTO)
    snapshot(topology, ttft_ms=2400, tbt_ms=20)
    _ticks(config, 2)
    rebalance = Rebalance.objects.get(topology=topology)
    assert (rebalance.target_prefill, rebalance.target_decode) == (2, 2)
    assert rebalance.moves == [{"role": "decode", "replicas": 2}, {"role": "prefill", "replicas": 2}]
    deployment = Deployment.objects.get(topology=topology)
    assert deployment.params["role"] == "decode" and deployment.params["replicas"] == 2


def test_links_down_nothing_moves_and_the_decision_says_why(make_topology, snapshot, operator):
    from telemetry.selectors import events_between

    topology = make_topology(budget=3)
    config = _planner(topology, operator, PlannerMode.AUTO)
    link = {
        "prefill": "p-0",
        "decode": "d-0",
        "state": "down",
        "status_code": "LLM_WAIT_PROCESS_TIMEOUT",
        "xfer_p50_ms": None,
        "xfer_p95_ms": None,
        "bytes_per_s": None,
        "transfers": 0,
        "failed": 3,
        "reason": "x",
    }
    snapshot(topology, ttft_ms=2400, tbt_ms=20, links=[link])
    _ticks(config, 4)
    decisions = list(Decision.objects.filter(topology=topology))
    assert decisions and {d.rule for d in decisions} == {"links_unhealthy"}
    assert "p-0 → d-0 down" in decisions[0].explanation and "link problem" in decisions[0].explanation
    assert not Deployment.objects.filter(topology=topology).exists()
    events = events_between(topology_id=topology.pk, start=time.time() - 60, end=time.time() + 60)
    assert any("link problem, not a ratio problem" in e["text"] for e in events)


def test_a_steady_topology_does_not_write_a_row_every_interval(make_topology, snapshot, operator):
    topology = make_topology(budget=3)
    config = _planner(topology, operator, PlannerMode.AUTO)
    snapshot(topology, ttft_ms=300, tbt_ms=20)
    _ticks(config, 10)
    assert Decision.objects.filter(topology=topology).count() == 1
