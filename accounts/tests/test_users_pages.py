from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.models import User

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_users_page_is_admin_only(client, make_user, role):
    client.force_login(make_user(role))
    assert client.get(reverse("accounts:users")).status_code == 403
    assert client.post(reverse("accounts:users"), {"username": "x"}).status_code == 403


def test_nav_shows_users_link_to_admins_only(client, admin_user, viewer):
    client.force_login(viewer)
    assert reverse("accounts:users") not in client.get(reverse("audit:activity")).content.decode()
    client.force_login(admin_user)
    assert reverse("accounts:users") in client.get(reverse("audit:activity")).content.decode()


def test_admin_adds_a_user_from_the_page(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("accounts:users"),
        {"username": "erin", "email": "", "role": "operator", "password": "plenty-long-secret"},
        follow=True,
    )
    assert "User erin created as operator." in response.content.decode()
    assert User.objects.get(username="erin").role == "operator"


def test_weak_password_shows_next_to_the_field(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("accounts:users"), {"username": "erin", "role": "viewer", "password": "short"}
    )
    assert response.status_code == 200
    assert "Choose a longer, less common password." in response.content.decode()
    assert not User.objects.filter(username="erin").exists()


def test_admin_edits_role_sets_password_and_deletes(client, admin_user, viewer):
    client.force_login(admin_user)
    url = reverse("accounts:user-edit", args=[viewer.pk])
    client.post(url, {"action": "save", "role": "operator", "email": "", "is_active": "on"})
    viewer.refresh_from_db()
    assert viewer.role == "operator"
    client.post(url, {"action": "password", "password": "brand-new-long-secret"})
    viewer.refresh_from_db()
    assert viewer.check_password("brand-new-long-secret")
    response = client.post(url, {"action": "delete"}, follow=True)
    assert "Tick the confirmation box" in response.content.decode()
    client.post(url, {"action": "delete", "confirm": "on"})
    assert not User.objects.filter(pk=viewer.pk).exists()


def test_admin_cannot_delete_themselves(client, admin_user, make_user):
    make_user("admin", username="second-admin")
    client.force_login(admin_user)
    response = client.post(
        reverse("accounts:user-edit", args=[admin_user.pk]),
        {"action": "delete", "confirm": "on"},
        follow=True,
    )
    assert "You cannot delete your own account." in response.content.decode()
    assert User.objects.filter(pk=admin_user.pk).exists()
