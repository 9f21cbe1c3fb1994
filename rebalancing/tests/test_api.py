"""The rebalancing endpoints: ratio, switch-role, planner, decisions, rebalances; their error shape,
roles, key scopes and OpenAPI schema."""

from __future__ import annotations

import pytest

from deployments.models import Deployment, Kind
from rebalancing.api import views
from rebalancing.models import Decision, Outcome, PlannerMode


@pytest.fixture
def as_operator(api_client, operator):
    api_client.force_authenticate(operator)
    return api_client


@pytest.fixture
def as_viewer(api_client, viewer):
    api_client.force_authenticate(viewer)
    return api_client


def test_ratio_answers_202_and_queues_the_first_move(as_operator, make_topology):
    topology = make_topology(budget=4)
    response = as_operator.post(
        f"/api/v1/topologies/{topology.pk}/ratio/", {"prefill": 2, "decode": 2}, format="json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["moves"] == [{"role": "prefill", "replicas": 2}, {"role": "decode", "replicas": 2}]
    assert body["state"] == "running" and body["next_move"] == 1
    deployment = Deployment.objects.get(pk=body["deployment"])
    assert deployment.kind == Kind.SCALE and deployment.params["role"] == "prefill"
    listed = as_operator.get(f"/api/v1/topologies/{topology.pk}/rebalances/").json()
    assert listed["results"][0]["id"] == body["id"]


def test_ratio_refusals_use_the_error_shape_and_name_the_field(as_operator, make_topology):
    topology = make_topology(budget=4)
    over = as_operator.post(
        f"/api/v1/topologies/{topology.pk}/ratio/", {"prefill": 3, "decode": 3}, format="json"
    )
    assert over.status_code == 400
    error = over.json()["error"]
    assert error["code"] == "ratio_refused" and "over the budget of 4" in error["fields"]["prefill"][0]
    bad = as_operator.post(f"/api/v1/topologies/{topology.pk}/ratio/", {"prefill": "x"}, format="json")
    assert bad.status_code == 400 and set(bad.json()["error"]["fields"]) == {"prefill", "decode"}
    undeployed = make_topology(deployed=False)
    busy = as_operator.post(
        f"/api/v1/topologies/{undeployed.pk}/ratio/", {"prefill": 2, "decode": 1}, format="json"
    )
    assert busy.status_code == 409 and "not deployed" in busy.json()["error"]["message"]


def test_switch_role_says_when_the_cluster_cannot_be_asked(as_operator, make_topology):
    topology = make_topology(budget=4, replicas=(1, 2))
    response = as_operator.post(
        f"/api/v1/topologies/{topology.pk}/switch-role/",
        {"instance": "x-decode-1-0", "target_role": "prefill"},
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "cluster_unreachable"
    wrong = as_operator.post(
        f"/api/v1/topologies/{topology.pk}/switch-role/",
        {"instance": "x", "target_role": "both"},
        format="json",
    )
    assert wrong.status_code == 400 and "target_role" in wrong.json()["error"]["fields"]


def test_planner_mode_and_parameters_round_trip_and_are_validated(as_operator, make_topology):
    topology = make_topology()
    url = f"/api/v1/topologies/{topology.pk}/planner/"
    assert as_operator.get(url).json()["mode"] == "off"
    body = {
        "mode": "advisory",
        "params": {"breach_intervals": 4, "cooldown_seconds": 60},
        "min_ratio": 0.25,
        "max_ratio": 3,
    }
    saved = as_operator.put(url, body, format="json")
    assert saved.status_code == 200, saved.content
    assert saved.json()["params"] == {"breach_intervals": 4, "cooldown_seconds": 60.0}
    assert as_operator.get(url).json()["mode"] == PlannerMode.ADVISORY
    bad = as_operator.put(url, {"mode": "auto", "params": {"breach_intervals": 0, "nope": 1}}, format="json")
    assert bad.status_code == 400
    fields = bad.json()["error"]["fields"]
    assert "use a number from 1 to 100" in fields["params.breach_intervals"][0]
    assert "unknown parameter" in fields["params.nope"][0]
    inverted = as_operator.put(url, {"mode": "auto", "min_ratio": 2, "max_ratio": 1}, format="json")
    assert inverted.status_code == 400 and "min_ratio" in inverted.json()["error"]["fields"]


def test_planner_state_says_whether_auto_is_paused_and_the_handoff_needs_both_bounds(
    as_operator, make_topology
):
    topology = make_topology()
    url = f"/api/v1/topologies/{topology.pk}/planner/"
    started = as_operator.put(url, {"mode": "auto"}, format="json").json()
    assert started["paused_reason"] == "" and started["other_owners"] == [] and started["paused_at"] is None
    handoff = as_operator.post(url + "handoff/", {"policy": "llama-pd"}, format="json")
    assert handoff.status_code == 400
    fields = handoff.json()["error"]["fields"]
    assert set(fields) == {"min_ratio", "max_ratio"} and "both bounds" in fields["min_ratio"][0]


def test_viewers_read_decisions_but_cannot_rebalance(as_viewer, make_topology):
    topology = make_topology()
    Decision.objects.create(
        topology=topology,
        mode="advisory",
        rule="ttft_breach",
        action="add_prefill",
        from_prefill=1,
        from_decode=1,
        to_prefill=2,
        to_decode=1,
        explanation="add one prefill: TTFT p95 2.40 s > 1.50 s target for 3 intervals",
        inputs={"observation": {"ttft_p95_ms": 2400}},
        outcome=Outcome.ADVISED,
    )
    listed = as_viewer.get(f"/api/v1/topologies/{topology.pk}/decisions/")
    assert listed.status_code == 200
    [row] = listed.json()["results"]
    assert row["rule"] == "ttft_breach" and row["inputs"]["observation"]["ttft_p95_ms"] == 2400
    refused = as_viewer.post(
        f"/api/v1/topologies/{topology.pk}/ratio/", {"prefill": 2, "decode": 1}, format="json"
    )
    assert refused.status_code == 403


def test_every_view_declares_key_scopes_and_the_schema_lists_the_paths(as_viewer):
    for name in (
        "TopologySwitchRole",
        "TopologyRatio",
        "TopologyPlanner",
        "TopologyDecisions",
        "TopologyRebalances",
    ):
        assert getattr(views, name).required_scopes == {"read": "topologies:read", "write": "rebalance"}
    schema = as_viewer.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    for path in ("switch-role", "ratio", "planner", "decisions", "rebalances"):
        assert f"/api/v1/topologies/{{id}}/{path}/" in schema["paths"], path
