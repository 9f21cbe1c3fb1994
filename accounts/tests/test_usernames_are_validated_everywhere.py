"""Usernames follow Django's username rule and carry nothing invisible (spaces, bidi overrides,
zero-width characters), through the API and the Users page alike, so nobody can be spoofed in lists
or the audit log."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from accounts.models import User

pytestmark = pytest.mark.django_db
PASSWORD = "plenty-long-secret"
SPOOFS = [
    ("two words", "U+0020"),
    ("admin\u202egnp.exe", "U+202E"),
    ("ad\u200bmin", "U+200B"),
    ("adm\u00a0in", "U+00A0"),
    ("tab\there", "U+0009"),
    ("semi;colon", "letters, digits and @ . + - _ only"),
    ("a" * 151, "150 characters"),
]


@pytest.mark.parametrize(("username", "fragment"), SPOOFS)
def test_the_api_refuses_spoofable_usernames_with_a_field_error(api_client, admin_user, username, fragment):
    api_client.force_authenticate(admin_user)
    response = api_client.post("/api/v1/users/", {"username": username, "password": PASSWORD}, format="json")
    assert response.status_code == 400, response.json()
    assert fragment in " ".join(response.json()["error"]["fields"]["username"])
    assert not User.objects.filter(username=username).exists()


@pytest.mark.parametrize(("username", "fragment"), SPOOFS[:5])
def test_the_users_page_refuses_them_too(client, admin_user, username, fragment):
    client.force_login(admin_user)
    response = client.post(
        reverse("accounts:users"), {"username": username, "password": PASSWORD, "role": "viewer"}
    )
    assert response.status_code == 200
    assert fragment in html.unescape(response.content.decode())
    assert not User.objects.filter(username=username).exists()


@pytest.mark.parametrize("username", ["dana", "dana-ops", "ops@example.com", "ünal", "李雷"])
def test_ordinary_names_letters_of_any_script_included_are_accepted(api_client, admin_user, username):
    api_client.force_authenticate(admin_user)
    response = api_client.post("/api/v1/users/", {"username": username, "password": PASSWORD}, format="json")
    assert response.status_code == 201, response.json()
    assert User.objects.filter(username=username).exists()
