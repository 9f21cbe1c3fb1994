from __future__ import annotations

import pytest

from accounts.models import User
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_admin_creates_a_user_and_it_is_audited(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    response = api_client.post(
        "/api/v1/users/", {"username": "dana", "password": "plenty-long-secret", "role": "operator"}
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["role"] == "operator"
    assert "password" not in body
    assert User.objects.get(username="dana").check_password("plenty-long-secret")
    event = AuditEvent.objects.get(action="user.create")
    assert event.actor == admin_user and event.target_label == "dana"


def test_weak_password_is_a_field_error_that_says_the_fix(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    response = api_client.post("/api/v1/users/", {"username": "dana", "password": "short"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert "password" in error["fields"]
    assert "Choose a longer" in error["fields"]["password"][0]


def test_duplicate_username_is_a_conflict(api_client, admin_user, viewer):
    api_client.force_authenticate(admin_user)
    response = api_client.post(
        "/api/v1/users/", {"username": viewer.username, "password": "plenty-long-secret"}
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "duplicate"


def test_admin_changes_role_and_deactivates(api_client, admin_user, viewer):
    api_client.force_authenticate(admin_user)
    response = api_client.patch(f"/api/v1/users/{viewer.pk}/", {"role": "operator", "is_active": False})
    assert response.status_code == 200
    viewer.refresh_from_db()
    assert viewer.role == "operator" and not viewer.is_active
    event = AuditEvent.objects.get(action="user.update")
    assert event.detail == {"role": ["viewer", "operator"], "is_active": [True, False]}


def test_last_admin_cannot_be_demoted_or_deleted(api_client, admin_user, operator):
    api_client.force_authenticate(admin_user)
    response = api_client.patch(f"/api/v1/users/{admin_user.pk}/", {"role": "viewer"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "last_admin"
    response = api_client.delete(f"/api/v1/users/{admin_user.pk}/")
    assert response.status_code == 409


def test_admin_deletes_another_user(api_client, admin_user, viewer):
    api_client.force_authenticate(admin_user)
    assert api_client.delete(f"/api/v1/users/{viewer.pk}/").status_code == 204
    assert not User.objects.filter(pk=viewer.pk).exists()
    assert AuditEvent.objects.get(action="user.delete").detail["username"] == viewer.username


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_non_admins_cannot_list_or_change_users(api_client, make_user, role):
    user = make_user(role)
    api_client.force_authenticate(user)
    assert api_client.get("/api/v1/users/").status_code == 403
    assert api_client.get(f"/api/v1/users/{user.pk}/").status_code == 403
    response = api_client.patch(f"/api/v1/users/{user.pk}/", {"role": "admin"})
    assert response.status_code == 403
    assert "needs the admin role" in response.json()["error"]["message"]
    user.refresh_from_db()
    assert user.role == role


def test_users_list_filters_by_role(api_client, admin_user, viewer, operator):
    api_client.force_authenticate(admin_user)
    body = api_client.get("/api/v1/users/?role=operator").json()
    assert [u["username"] for u in body["results"]] == [operator.username]


def test_me_describes_the_current_user(api_client, operator):
    api_client.force_authenticate(operator)
    body = api_client.get("/api/v1/me/").json()
    assert body["username"] == operator.username
    assert body["role"] == "operator"
    assert body["can_operate"] is True and body["can_admin"] is False


def test_me_needs_a_session(api_client):
    response = api_client.get("/api/v1/me/")
    assert response.status_code in (401, 403)
    assert set(response.json()["error"]) == {"code", "message", "fields"}


def test_unknown_role_names_the_roles_to_use(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    created = api_client.post(
        "/api/v1/users/", {"username": "dana", "password": "plenty-long-secret", "role": "boss"}
    )
    assert created.status_code == 400
    assert created.json()["error"]["fields"]["role"] == [
        '"boss" is not a role; use one of: viewer, operator, admin'
    ]
    listed = api_client.get("/api/v1/users/?role=boss")
    assert listed.status_code == 400
    assert "use one of: viewer, operator, admin" in listed.json()["error"]["message"]


def test_update_with_a_weak_password_changes_nothing(api_client, admin_user, viewer):
    api_client.force_authenticate(admin_user)
    response = api_client.patch(f"/api/v1/users/{viewer.pk}/", {"role": "operator", "password": "short"})
    assert response.status_code == 400
    assert "password" in response.json()["error"]["fields"]
    viewer.refresh_from_db()
    assert viewer.role == "viewer"
    assert viewer.check_password("correct-horse-battery")
    assert not AuditEvent.objects.filter(action="user.update").exists()


def test_update_changes_role_and_password_together(api_client, admin_user, viewer):
    api_client.force_authenticate(admin_user)
    response = api_client.patch(
        f"/api/v1/users/{viewer.pk}/", {"role": "operator", "password": "plenty-long-secret"}
    )
    assert response.status_code == 200, response.json()
    viewer.refresh_from_db()
    assert viewer.role == "operator" and viewer.check_password("plenty-long-secret")
    assert {"user.update", "user.password_set"} <= set(AuditEvent.objects.values_list("action", flat=True))
