"""The role alone decides what a user may do: a superuser who sets their own role to viewer loses
admin rights in the pages and the API, and Django's /admin/ site with them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.models import User
from accounts.selectors import active_admin_count

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(make_user):
    user = make_user("admin", username="root")
    user.is_superuser = user.is_staff = True
    user.save()
    make_user("admin", username="second-admin")  # so the last-admin rule does not refuse the demotion
    return user


def test_a_superuser_who_demotes_themselves_to_viewer_loses_admin_rights(api_client, client, superuser):
    api_client.force_authenticate(superuser)
    response = api_client.patch(f"/api/v1/users/{superuser.pk}/", {"role": "viewer"}, format="json")
    assert response.status_code == 200, response.json()
    superuser.refresh_from_db()
    assert superuser.role == "viewer" and not superuser.is_superuser and not superuser.is_staff
    api_client.force_authenticate(superuser)
    assert api_client.get("/api/v1/users/").status_code == 403
    me = api_client.get("/api/v1/me/").json()
    assert me["role"] == "viewer" and me["can_admin"] is False and me["can_operate"] is False
    client.force_login(superuser)
    assert client.get(reverse("accounts:users")).status_code == 403
    assert client.get("/clusters/register/").status_code == 403
    assert client.get("/admin/").status_code == 302  # to the admin login: no staff access left


def test_the_users_page_demotion_does_the_same(client, superuser):
    client.force_login(superuser)
    url = reverse("accounts:user-edit", args=[superuser.pk])
    client.post(url, {"action": "save", "role": "operator", "email": "", "is_active": "on"})
    superuser.refresh_from_db()
    assert superuser.role == "operator" and not superuser.is_superuser
    assert client.get(reverse("accounts:users")).status_code == 403


def test_a_superuser_flag_without_the_admin_role_grants_nothing(make_user):
    user = make_user("viewer", username="legacy")
    user.is_superuser = True
    user.save()
    assert not User.objects.get(pk=user.pk).has_role("operator")
    assert active_admin_count() == 0


def test_createsuperuser_makes_an_admin(db):
    user = User.objects.create_superuser(username="boss", password="correct-horse-battery")
    assert user.role == "admin" and user.has_role("admin")
