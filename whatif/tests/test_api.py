"""The what-if endpoints: start (202), list, read, cancel, apply (diff, then the planner's ratio path or a new
revision); who may do what; the limits' answers; field errors; all as the OpenAPI document says."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from rebalancing.models import Rebalance
from whatif.models import WhatIfRun, WhatIfState

RESULT = {
    "requests": 60,
    "splits": [
        {
            "prefill": p,
            "decode": d,
            "attainment": a,
            "ttft_attainment": a,
            "tbt_attainment": 1.0,
            "goodput_rps": a,
            "failed": 0,
        }
        for p, d, a in ((1, 3, 0.5), (2, 2, 0.9), (3, 1, 0.7))
    ],
    "current": {"prefill": 1, "decode": 1},
    "note": "60 requests replayed",
}


@pytest.fixture
def as_operator(api_client, operator):
    api_client.force_authenticate(operator)
    return api_client


def _done(topology, operator) -> WhatIfRun:
    """A succeeded run, as the task stores it (the simulator's own answer is covered in test_runs)."""
    return WhatIfRun.objects.create(
        topology=topology,
        window_start=0,
        window_end=300,
        splits=[[1, 3], [2, 2], [3, 1]],
        requested_by=operator,
        requested_by_label=operator.username,
        state=WhatIfState.SUCCEEDED,
        progress=1.0,
        result={**RESULT, "recommended": RESULT["splits"][1]},
    )


def test_operators_start_runs_and_the_limit_names_the_running_one(as_operator, make_topology):
    topology = make_topology(budget=4)
    url = f"/api/v1/topologies/{topology.pk}/what-if-runs/"
    started = as_operator.post(url, {"window_seconds": 300, "splits": [[2, 2], [3, 1]]}, format="json")
    assert started.status_code == 202, started.content
    body = started.json()
    assert (body["state"], body["splits"], body["progress"]) == ("queued", [[2, 2], [3, 1]], 0.0)
    busy = as_operator.post(url, {"window_seconds": 300}, format="json")
    assert busy.status_code == 409 and f"what-if #{body['id']}" in busy.json()["error"]["message"]
    other = make_topology(budget=4)
    as_operator.post(f"/api/v1/topologies/{other.pk}/what-if-runs/", {}, format="json")
    third = make_topology(budget=4)
    limited = as_operator.post(f"/api/v1/topologies/{third.pk}/what-if-runs/", {}, format="json")
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "whatif_limit"
    assert f"#{body['id']}" in limited.json()["error"]["message"]
    cancelled = as_operator.post(f"/api/v1/what-if-runs/{body['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    listed = as_operator.get(url).json()["results"]
    assert [r["id"] for r in listed] == [body["id"]]
    assert AuditEvent.objects.filter(action="whatif.cancel").count() == 1


def test_bad_inputs_are_field_errors(as_operator, make_topology):
    topology = make_topology(budget=4)
    url = f"/api/v1/topologies/{topology.pk}/what-if-runs/"
    for data, field in (
        ({"window_seconds": 10}, "window_seconds"),
        ({"window_seconds": "an hour"}, "window_seconds"),
        ({"end": 4e201}, "end"),
        ({"splits": [[1]]}, "splits"),
        ({"splits": [[3, 3]]}, "splits"),
        ({"splits": "2x2"}, "splits"),
    ):
        response = as_operator.post(url, data, format="json")
        fields = response.json()["error"]["fields"]
        assert response.status_code == 400 and any(name.startswith(field) for name in fields), (
            data,
            response.content,
        )
    assert not WhatIfRun.objects.exists()


def test_viewers_read_runs_but_cannot_start_cancel_or_apply(api_client, viewer, operator, make_topology):
    topology = make_topology(budget=4)
    run = _done(topology, operator)
    api_client.force_authenticate(viewer)
    assert (
        api_client.post(f"/api/v1/topologies/{topology.pk}/what-if-runs/", {}, format="json").status_code
        == 403
    )
    assert api_client.post(f"/api/v1/what-if-runs/{run.pk}/cancel/").status_code == 403
    apply = api_client.post(
        f"/api/v1/what-if-runs/{run.pk}/apply/", {"prefill": 2, "decode": 2}, format="json"
    )
    assert apply.status_code == 403
    read = api_client.get(f"/api/v1/what-if-runs/{run.pk}/")
    assert read.status_code == 200 and read.json()["result"]["recommended"]["prefill"] == 2
    assert api_client.get(f"/api/v1/topologies/{topology.pk}/what-if-runs/").json()["count"] == 1


def test_apply_shows_the_diff_then_starts_the_planners_ratio_change_and_audits_it(
    as_operator, make_topology, operator
):
    topology = make_topology(budget=4)
    run = _done(topology, operator)
    url = f"/api/v1/what-if-runs/{run.pk}/apply/"
    preview = as_operator.post(url, {"prefill": 2, "decode": 2}, format="json")
    assert preview.status_code == 200, preview.content
    assert preview.json()["current"] == {"prefill": 1, "decode": 1} and preview.json()["path"] == "rebalance"
    assert not Rebalance.objects.exists()
    unsimulated = as_operator.post(url, {"prefill": 1, "decode": 1, "confirm": True}, format="json")
    assert unsimulated.status_code == 400 and "2P/2D" in unsimulated.json()["error"]["fields"]["prefill"][0]
    applied = as_operator.post(url, {"prefill": 2, "decode": 2, "confirm": True}, format="json")
    assert applied.status_code == 202, applied.content
    rebalance = Rebalance.objects.get(pk=applied.json()["rebalance"])
    assert (rebalance.target_prefill, rebalance.target_decode, rebalance.topology_id) == (2, 2, topology.pk)
    event = AuditEvent.objects.get(action="whatif.apply")
    assert event.detail["to"] == {"prefill": 2, "decode": 2} and event.detail["rebalance"] == rebalance.pk


def test_apply_to_an_undeployed_topology_saves_a_revision(as_operator, make_topology, operator):
    topology = make_topology(budget=4, deployed=False)
    run = _done(topology, operator)
    applied = as_operator.post(
        f"/api/v1/what-if-runs/{run.pk}/apply/", {"prefill": 3, "decode": 1, "confirm": True}, format="json"
    )
    assert applied.status_code == 202 and applied.json()["path"] == "revision", applied.content
    topology.refresh_from_db()
    assert (
        topology.spec["roles"]["prefill"]["replicas"] == 3
        and topology.spec["roles"]["decode"]["replicas"] == 1
    )
    assert applied.json()["revision"] == topology.current_revision.number == 2


def test_the_schema_lists_the_what_if_endpoints(as_operator):
    paths = as_operator.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    for path in (
        "/api/v1/topologies/{id}/what-if-runs/",
        "/api/v1/what-if-runs/{id}/",
        "/api/v1/what-if-runs/{id}/cancel/",
        "/api/v1/what-if-runs/{id}/apply/",
    ):
        assert path in paths, path
