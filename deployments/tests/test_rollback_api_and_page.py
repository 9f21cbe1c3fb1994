"""The same rollback rules through the REST API (as its served schema says) and the page's forms."""

from __future__ import annotations

import pytest

from deployments.models import Deployment, Kind
from deployments.tests.rollback_helpers import finish_as, new_image, save_change
from topologies.models import Topology

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_operator(api_client, operator):
    api_client.force_authenticate(operator)
    return api_client


def test_api_plan_names_the_default_and_what_each_revision_changes(as_operator, after_auto_rollback):
    body = as_operator.get(f"/api/v1/topologies/{after_auto_rollback.pk}/rollback/").json()
    assert (body["running"], body["desired"], body["default"], body["keep_running"]) == (2, 3, 1, True)
    first, *_ = body["candidates"]
    assert first["revision"] == 3 and first["known_good"] is False and "failed" in first["outcome"]
    assert first["differences"] == [f"image: {_tag(after_auto_rollback, 2)} → {_tag(after_auto_rollback, 3)}"]


def _tag(topology: Topology, number: int) -> str:
    return str(topology.revisions.get(number=number).spec["image"])


def test_api_rollback_without_a_revision_goes_to_the_last_good_one(as_operator, after_auto_rollback):
    response = as_operator.post(f"/api/v1/topologies/{after_auto_rollback.pk}/rollback/", {}, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["revision"] == 1 and response.json()["kind"] == "rollback"


def test_api_refuses_a_failed_revision_unless_confirmed(as_operator, after_auto_rollback):
    url = f"/api/v1/topologies/{after_auto_rollback.pk}/rollback/"
    refused = as_operator.post(url, {"revision": 3}, format="json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "untested_revision"
    assert error["fields"]["allow_untested"] == ["set it to true to deploy revision 3 anyway"]
    bad = as_operator.post(url, {"revision": 3, "allow_untested": "perhaps"}, format="json")
    assert bad.status_code == 400 and "allow_untested" in bad.json()["error"]["fields"]
    ok = as_operator.post(url, {"revision": 3, "allow_untested": True}, format="json")
    assert ok.status_code == 202 and ok.json()["params"]["untested"] is True


def test_api_keep_running(as_operator, api_client, viewer, after_auto_rollback):
    url = f"/api/v1/topologies/{after_auto_rollback.pk}/keep-running/"
    response = as_operator.post(url)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "desired": 2,
        "running": 2,
        "message": "kept revision 2; revision 3 is no longer desired",
    }
    again = as_operator.post(url)
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_desired"
    api_client.force_authenticate(viewer)
    assert api_client.post(url).status_code == 403


def test_served_schema_describes_the_rollback_rules(as_operator):
    schema = as_operator.get("/api/v1/schema/?format=json").json()
    rollback = schema["paths"]["/api/v1/topologies/{id}/rollback/"]
    assert "get" in rollback and "post" in rollback
    keep = schema["paths"]["/api/v1/topologies/{id}/keep-running/"]["post"]
    assert "200" in keep["responses"]
    props = schema["components"]["schemas"]["RollbackInputRequest"]["properties"]
    assert set(props) == {"revision", "allow_untested"}
    deploy = schema["components"]["schemas"]["DeployInputRequest"]["properties"]
    assert "override_preflight" in deploy
    plan = schema["components"]["schemas"]["RollbackPlan"]["properties"]
    assert {"running", "desired", "default", "keep_running", "candidates"} <= set(plan)


def test_page_offers_keeping_the_running_revision_first(client, operator, after_auto_rollback):
    client.force_login(operator)
    page = client.get(f"/topologies/{after_auto_rollback.pk}/").content.decode()
    assert '<option value="keep" selected>revision 2 (running): keep it</option>' in page
    assert '<optgroup label="Ran successfully"><option value="1" >revision 1</option></optgroup>' in page
    assert '<option value="3">revision 3 (failed)</option>' in page
    assert "Keep revision 2</button>" in page and "data-keep-running" in page


def test_page_rollback_asks_first_and_names_what_it_deploys(client, operator, after_auto_rollback):
    client.force_login(operator)
    pk = after_auto_rollback.pk
    confirm = client.get(f"/deployments/topology/{pk}/rollback/confirm/?revision=3").content.decode()
    assert "Deploy revision 3 in place of revision 2?" in confirm
    assert "never ran successfully</strong>: its last deploy failed: " in confirm
    assert _tag(after_auto_rollback, 3) in confirm and f"image: {_tag(after_auto_rollback, 2)} →" in confirm
    assert 'name="allow_untested" value="yes"' in confirm
    # A POST that skipped the confirmation only shows it.
    shown = client.post(f"/deployments/topology/{pk}/rollback/", {"revision": "3"})
    assert shown.status_code == 200 and "Deploy revision 3 in place of revision 2?" in shown.content.decode()
    refused = client.post(f"/deployments/topology/{pk}/rollback/", {"revision": "3", "confirm": "yes"})
    assert refused.status_code == 400 and "never ran successfully" in refused.content.decode()
    assert not Deployment.objects.filter(kind=Kind.ROLLBACK).exists()
    done = client.post(f"/deployments/topology/{pk}/rollback/", {"revision": "1", "confirm": "yes"})
    assert done.status_code == 302 and done["Location"].endswith("#deployments")
    assert Deployment.objects.get(kind=Kind.ROLLBACK).revision_number == 1


def test_page_rollback_refuses_garbage_naming_the_choice(client, operator, after_auto_rollback):
    client.force_login(operator)
    url = f"/deployments/topology/{after_auto_rollback.pk}/rollback/confirm/"
    response = client.get(url + "?revision=٣")
    assert response.status_code == 400 and "Choose one of the topology" in response.content.decode()
    response = client.get(url + "?revision=99")
    assert response.status_code == 400 and "has no revision 99" in response.content.decode()


def test_page_keep_running_returns_to_the_panel_in_sync(client, operator, after_auto_rollback):
    client.force_login(operator)
    pk = after_auto_rollback.pk
    confirm = client.get(f"/deployments/topology/{pk}/rollback/confirm/?revision=keep").content.decode()
    assert "Keep revision 2 running?" in confirm and "nothing is deployed" in confirm
    response = client.post(f"/deployments/topology/{pk}/keep-running/")
    assert response.status_code == 302
    panel = client.get(f"/deployments/topology/{pk}/panel/").content.decode()
    assert 'data-rollout="in_sync"' in panel and "failed and was set aside" in panel
    assert "data-keep-running" not in panel
    save_change(Topology.objects.get(pk=pk), operator, new_image("v4"))
    finish_as(Topology.objects.get(pk=pk), operator)
