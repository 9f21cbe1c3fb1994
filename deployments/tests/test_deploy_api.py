"""The deploy, rollback, scale, re-apply and cancel endpoints, and the deployments list."""

from __future__ import annotations

import pytest

from deployments.models import Deployment, DeploymentStep, Kind, State


@pytest.fixture
def as_operator(api_client, operator):
    api_client.force_authenticate(operator)
    return api_client


def test_deploy_answers_202_with_the_queued_deployment(as_operator, topology):
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["state"] == "queued" and body["kind"] == "deploy"
    assert body["revision"] == topology.current_revision.number
    assert body["requested_by"] == "operator-user"
    deployment = Deployment.objects.get(pk=body["id"])
    assert deployment.steps.first().message == "Queued by operator-user"


def test_deploy_refuses_second_active_deployment(as_operator, topology):
    first = as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/").json()
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "deployment_active"
    assert first["id"] and error["message"] == "the deploy of revision 1 is queued; wait for it or cancel it"


def test_a_finished_deployment_does_not_block_the_next(as_operator, topology):
    first = as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/").json()
    Deployment.objects.filter(pk=first["id"]).update(state=State.FAILED)
    assert as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/").status_code == 202


def test_viewer_cannot_deploy_but_can_read(api_client, viewer, topology):
    api_client.force_authenticate(viewer)
    response = api_client.post(f"/api/v1/topologies/{topology.pk}/deploy/")
    assert response.status_code == 403
    assert "operator" in response.json()["error"]["message"]
    assert api_client.get("/api/v1/deployments/").status_code == 200


def test_rollback_to_a_missing_revision_names_the_existing_ones(as_operator, topology):
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/rollback/", {"revision": 7})
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["revision"] == ["use one of the existing revision numbers: [1]"]
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/rollback/", {})
    assert response.status_code == 400 and "revision" in response.json()["error"]["fields"]


def test_rollback_queues_the_earlier_revision(as_operator, topology):
    body = {"revision": 1, "allow_untested": True}  # it never ran: only with an explicit confirmation
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/rollback/", body, format="json")
    assert response.status_code == 202
    assert response.json()["kind"] == "rollback" and response.json()["revision"] == 1


def test_scale_saves_a_new_revision_and_deploys_it(as_operator, topology):
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/scale/", {"role": "decode", "replicas": 2})
    assert response.status_code == 202, response.content
    body = response.json()
    topology.refresh_from_db()
    assert topology.current_revision.number == 2
    assert topology.spec["roles"]["decode"]["replicas"] == 2
    assert body["kind"] == "scale" and body["revision"] == 2
    assert body["params"] == {"role": "decode", "replicas": 2, "from": 1}
    assert body["description"] == "scale of decode to 2, revision 2"


def test_scale_input_errors_name_the_field(as_operator, topology):
    response = as_operator.post(
        f"/api/v1/topologies/{topology.pk}/scale/", {"role": "router", "replicas": -1}
    )
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert set(fields) == {"role", "replicas"}
    same = as_operator.post(f"/api/v1/topologies/{topology.pk}/scale/", {"role": "prefill", "replicas": 1})
    assert same.status_code == 400 and "different" in same.json()["error"]["fields"]["replicas"][0]


def test_scale_while_a_deployment_runs_is_409_and_saves_no_revision(as_operator, topology):
    as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/")
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/scale/", {"role": "decode", "replicas": 3})
    assert response.status_code == 409
    assert topology.revisions.count() == 1


def test_reapply_uses_the_deployed_revision(as_operator, topology):
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/reapply/")
    assert response.status_code == 202 and response.json()["kind"] == "reapply"


def test_list_filters_by_topology_state_and_kind(as_operator, make_topology, topology):
    routing = {
        "model_name": "second-model",
        "timeout_seconds": 300,
        "retry_attempts": 3,
        "retry_interval_ms": 150,
    }
    # A model name of its own: the same name on one router is a conflict preflight refuses to deploy.
    other = make_topology(name="second", model_name="second-model", routing=routing)
    a = as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/").json()
    b = as_operator.post(f"/api/v1/topologies/{other.pk}/deploy/").json()
    Deployment.objects.filter(pk=b["id"]).update(state=State.SUCCEEDED)
    ids = lambda q: [d["id"] for d in as_operator.get(f"/api/v1/deployments/{q}").json()["results"]]  # noqa: E731
    assert ids(f"?topology={topology.pk}") == [a["id"]]
    assert ids("?state=succeeded") == [b["id"]]
    assert ids("?active=true") == [a["id"]]
    assert set(ids("?kind=deploy")) == {a["id"], b["id"]}


def test_list_filter_error_names_the_accepted_values(as_operator):
    response = as_operator.get("/api/v1/deployments/?state=bogus")
    assert response.status_code == 400
    message = " ".join(response.json()["error"]["fields"]["state"])
    assert (
        "bogus is not one of the choices" in message and "succeeded" in message and "rolled_back" in message
    )
    kinds = " ".join(as_operator.get("/api/v1/deployments/?kind=nope").json()["error"]["fields"]["kind"])
    assert "use one of:" in kinds and "rollback" in kinds and "scale" in kinds


def test_detail_returns_the_step_log(as_operator, topology):
    created = as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/").json()
    deployment = Deployment.objects.get(pk=created["id"])
    DeploymentStep.objects.create(
        deployment=deployment, state=State.PREFLIGHT, message="Running preflight checks"
    )
    body = as_operator.get(f"/api/v1/deployments/{deployment.pk}/").json()
    assert [s["message"] for s in body["steps"]] == ["Queued by operator-user", "Running preflight checks"]


def test_cancel_marks_the_deployment_and_refuses_finished_ones(as_operator, topology):
    created = as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/").json()
    response = as_operator.post(f"/api/v1/deployments/{created['id']}/cancel/")
    assert response.status_code == 202 and response.json()["cancel_requested"] is True
    Deployment.objects.filter(pk=created["id"]).update(state=State.FAILED)
    assert as_operator.post(f"/api/v1/deployments/{created['id']}/cancel/").status_code == 409


def test_actions_are_audited(as_operator, topology):
    from audit.models import AuditEvent

    as_operator.post(f"/api/v1/topologies/{topology.pk}/deploy/")
    event = AuditEvent.objects.filter(action="topology.deploy").get()
    assert event.actor_label == "operator-user" and event.target_id == str(topology.pk)
    assert Deployment.objects.get().kind == Kind.DEPLOY


def test_deploy_policy_defaults_then_set_and_validated(as_operator, topology, settings):
    settings.DEPLOY_READY_TIMEOUT_SECONDS = 600
    url = f"/api/v1/topologies/{topology.pk}/deploy-policy/"
    assert as_operator.get(url).json() == {
        "ready_timeout_seconds": None,
        "auto_rollback": None,
        "keep_failed_first_deploy": False,
        "effective_ready_timeout_seconds": 600,
        "effective_auto_rollback": True,
    }
    response = as_operator.put(url, {"ready_timeout_seconds": 5, "auto_rollback": False})
    assert response.status_code == 400 and "ready_timeout_seconds" in response.json()["error"]["fields"]
    response = as_operator.put(url, {"ready_timeout_seconds": 120, "auto_rollback": False})
    assert response.status_code == 200
    assert response.json()["effective_ready_timeout_seconds"] == 120
    assert response.json()["effective_auto_rollback"] is False
    response = as_operator.put(
        url, {"ready_timeout_seconds": None, "auto_rollback": None, "keep_failed_first_deploy": True}
    )
    assert response.status_code == 200 and response.json()["keep_failed_first_deploy"] is True
    response = as_operator.put(
        url, {"ready_timeout_seconds": None, "auto_rollback": None}
    )  # omitted: unchanged
    assert response.json()["keep_failed_first_deploy"] is True


def test_viewer_cannot_change_the_deploy_policy(api_client, viewer, topology):
    api_client.force_authenticate(viewer)
    url = f"/api/v1/topologies/{topology.pk}/deploy-policy/"
    assert api_client.get(url).status_code == 200
    assert api_client.put(url, {"ready_timeout_seconds": 60, "auto_rollback": True}).status_code == 403


def test_scale_beyond_the_rebalancing_bounds_names_the_spec_field(as_operator, topology):
    response = as_operator.post(f"/api/v1/topologies/{topology.pk}/scale/", {"role": "decode", "replicas": 7})
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert "roles.decode.replicas" in fields and "1..3" in fields["roles.decode.replicas"][0]
    assert topology.revisions.count() == 1
