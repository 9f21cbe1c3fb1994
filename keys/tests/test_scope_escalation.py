"""A role can never be escalated through keys."""

from __future__ import annotations

import pytest

from accounts.roles import Role
from controlplane.api.errors import DomainError
from keys import hotpath, services


def test_a_viewer_cannot_give_a_key_deploy(viewer, issue):
    with pytest.raises(DomainError) as caught:
        issue(viewer, scopes=["deploy"])
    assert "scopes" in caught.value.fields
    assert "role (viewer)" in caught.value.fields["scopes"][0]


def test_default_scopes_are_cut_to_the_role(viewer, issue):
    issued = issue(viewer)  # automation's template wants deploy; a viewer gets what it may hold
    assert set(issued.key.scopes) <= {"topologies:read", "telemetry:read"}


def test_a_key_creates_keys_only_within_its_own_scopes(operator, issue, key_client):
    parent = issue(operator, scopes=["keys:write", "topologies:read"])
    client = key_client(parent.secret)
    refused = client.post(
        "/api/v1/keys/", {"name": "child", "purpose": "automation", "scopes": ["deploy"]}, format="json"
    )
    assert refused.status_code == 400, refused.content
    assert "key making this request" in refused.json()["error"]["fields"]["scopes"][0]
    made = client.post(
        "/api/v1/keys/",
        {"name": "child", "purpose": "automation", "scopes": ["topologies:read"]},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["key"]["scopes"] == ["topologies:read"]


def test_a_key_without_keys_write_cannot_create_keys(operator, issue, key_client):
    parent = issue(operator, scopes=["topologies:read"])
    response = key_client(parent.secret).post(
        "/api/v1/keys/", {"name": "child", "purpose": "automation"}, format="json"
    )
    assert response.status_code == 403
    assert "keys:write" in response.json()["error"]["message"]


def test_only_admins_issue_keys_for_others(operator, viewer, admin_user):
    with pytest.raises(DomainError, match="Only admins"):
        services.key_create(actor=operator, owner=viewer, name="x", purpose="debug")
    issued = services.key_create(actor=admin_user, owner=viewer, name="x", purpose="debug")
    assert issued.key.owner == viewer


def test_a_demoted_owner_takes_the_scopes_from_their_keys_at_once(operator, issue, key_client):
    issued = issue(operator, scopes=["deploy", "topologies:read"])
    client = key_client(issued.secret)
    assert client.get("/api/v1/topologies/").status_code == 200
    grant = hotpath.authenticate(issued.secret, kind="management", source_ip="127.0.0.1")
    assert "deploy" in grant.record.scopes
    grant.settle()
    operator.role = Role.VIEWER
    operator.save()
    grant = hotpath.authenticate(issued.secret, kind="management", source_ip="127.0.0.1")
    assert "deploy" not in grant.record.scopes and "topologies:read" in grant.record.scopes
    response = client.post("/api/v1/topologies/1/deploy/", {}, format="json")
    assert response.status_code == 403


def test_a_key_cannot_be_changed_to_scopes_beyond_the_owner(operator, issue):
    issued = issue(operator, scopes=["topologies:read"])
    with pytest.raises(DomainError) as caught:
        services.key_update(key=issued.key, actor=operator, changes={"scopes": ["clusters:write"]})
    assert "role (operator)" in caught.value.fields["scopes"][0]


def test_inference_keys_hold_only_inference(operator, issue):
    with pytest.raises(DomainError, match="inference"):
        issue(operator, purpose="production", scopes=["deploy"])


def test_expiry_is_capped_per_purpose(operator, issue):
    from datetime import timedelta

    from django.utils import timezone

    with pytest.raises(DomainError) as caught:
        issue(operator, purpose="debug", expires_at=timezone.now() + timedelta(days=8))
    assert "at most 7 days" in caught.value.fields["expires_at"][0]
    with pytest.raises(DomainError):
        issue(operator, purpose="debug", expires_at=timezone.now() - timedelta(days=1))
