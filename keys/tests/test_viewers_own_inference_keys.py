"""An admin decides whether viewers may issue inference keys for themselves (on by default): the service,
the API and the Keys pages follow the one switch, and each change is audited."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEvent
from controlplane.api.errors import DomainError
from keys import services
from keys.models import ApiKey
from keys.tests.test_pages import create_form

pytestmark = pytest.mark.django_db


def _session(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _inference(owner, actor=None):
    return services.key_create(actor=actor or owner, owner=owner, name="laptop", purpose="debug")


def test_by_default_a_viewer_issues_their_own_inference_key(viewer):
    assert _session(viewer).get("/api/v1/key-policy/").json()["viewers_issue_inference_keys"] is True
    assert _inference(viewer).key.kind == "inference"


def test_an_admin_turns_it_off_through_the_api_and_it_is_audited(admin_user, viewer, operator):
    answer = _session(admin_user).put(
        "/api/v1/key-policy/", {"viewers_issue_inference_keys": False}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["viewers_issue_inference_keys"] is False
    assert answer.json()["updated_by"] == admin_user.get_username()
    event = AuditEvent.objects.get(action="keys.policy")
    assert event.detail == {"viewers_issue_inference_keys": False, "was": True}

    refused = _session(viewer).post("/api/v1/keys/", {"name": "laptop", "purpose": "debug"}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "viewer_keys_off"
    with pytest.raises(DomainError) as error:
        _inference(viewer)
    assert error.value.code == "viewer_keys_off" and "ask an admin" in error.value.message
    assert not ApiKey.objects.filter(owner=viewer).exists()

    # An admin may still issue one for the viewer; operators issue their own as before.
    assert _inference(viewer, actor=admin_user).key.owner == viewer
    assert _inference(operator).key.kind == "inference"


def test_a_form_body_without_the_field_is_refused_and_changes_nothing(admin_user):
    """A form-encoded PUT that leaves the field out has not said false (DRF would read an unticked box)."""
    answer = _session(admin_user).put(
        "/api/v1/key-policy/", "other=true", content_type="application/x-www-form-urlencoded"
    )
    assert answer.status_code == 400, answer.content
    assert "viewers_issue_inference_keys" in answer.json()["error"]["fields"]
    assert _session(admin_user).get("/api/v1/key-policy/").json()["viewers_issue_inference_keys"] is True


def test_only_admins_change_it(viewer, operator):
    for user in (viewer, operator):
        answer = _session(user).put(
            "/api/v1/key-policy/", {"viewers_issue_inference_keys": False}, format="json"
        )
        assert answer.status_code == 403
    assert _session(viewer).get("/api/v1/key-policy/").json()["viewers_issue_inference_keys"] is True


def test_an_admin_key_without_keys_admin_cannot_change_it(admin_user):
    issued = services.key_create(
        actor=admin_user, owner=admin_user, name="ci", purpose="automation", scopes=["keys:read"]
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    answer = client.put("/api/v1/key-policy/", {"viewers_issue_inference_keys": False}, format="json")
    assert answer.status_code == 403
    assert client.get("/api/v1/key-policy/").status_code == 200


def test_the_keys_pages_switch_it_and_tell_a_viewer(client, admin_user, viewer):
    client.force_login(admin_user)
    listing = client.get("/keys/").content.decode()
    assert "Viewers may issue their own inference keys" in listing and "checked" in listing
    assert client.post("/keys/policy/", {}).status_code == 302
    assert AuditEvent.objects.filter(action="keys.policy", actor=admin_user).count() == 1

    client.force_login(viewer)
    assert client.post("/keys/policy/", {"viewers_issue_inference_keys": "on"}).status_code == 403
    listing = client.get("/keys/").content.decode()
    assert "data-viewer-keys-off" in listing
    hint = listing[listing.index("data-readonly-hint") :].split("</p>", 1)[0]  # the read-only line agrees
    assert "manage your own inference keys" not in hint and "turned off issuing inference keys" in hint
    new = client.get("/keys/new/").content.decode()
    assert 'class="card purpose-card purpose-off" data-purpose="debug"' in new
    assert "data-viewer-keys-off" in new
    assert 'href="/keys/new/automation/"' in new  # management keys stay open to viewers
    refused = client.post("/keys/new/debug/", create_form(client, "debug") | {"name": "laptop"})
    assert refused.status_code == 400 and "ask an admin" in refused.content.decode()
    assert not ApiKey.objects.filter(owner=viewer).exists()
