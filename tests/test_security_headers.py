from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_pages_carry_the_security_headers(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def test_session_cookie_is_http_only_and_same_site(client, viewer):
    response = client.post(
        "/accounts/login/", {"username": viewer.username, "password": "correct-horse-battery"}
    )
    cookie = response.cookies["sessionid"]
    assert cookie["httponly"]
    assert cookie["samesite"] == "Lax"


def test_pages_have_no_inline_scripts_or_styles(client, admin_user):
    client.force_login(admin_user)
    for path in ("/", "/activity/", "/accounts/users/", "/accounts/login/"):
        body = client.get(path).content.decode()
        assert "<script>" not in body and "style=" not in body and "<style" not in body, path


def test_pages_need_login(client):
    for path in ("/", "/activity/", "/accounts/users/"):
        response = client.get(path)
        assert response.status_code == 302, path
        assert response["Location"].startswith("/accounts/login/")
