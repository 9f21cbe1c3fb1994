"""The REST skeleton: one error shape everywhere, pagination, a valid OpenAPI document, local docs."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from openapi_spec_validator import validate

from audit.services import audit_record
from tests.support import ROOT, VENV_BIN

pytestmark = pytest.mark.django_db


def _assert_error_shape(response, status, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "fields"}
    assert body["error"]["message"]
    if code:
        assert body["error"]["code"] == code
    return body["error"]


def test_400_names_each_field_and_the_fix(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    error = _assert_error_shape(
        api_client.post("/api/v1/users/", {"role": "emperor"}, format="json"), 400, "invalid"
    )
    assert set(error["fields"]) == {"username", "password", "role"}
    assert error["message"].startswith(("username:", "password:", "role:"))


def test_401_with_www_authenticate_without_a_session_or_key(api_client):
    response = api_client.get("/api/v1/me/")
    error = _assert_error_shape(response, 401)
    assert error["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == 'Bearer realm="tandem"'


def test_403_names_the_role_needed(api_client, viewer):
    api_client.force_authenticate(viewer)
    error = _assert_error_shape(api_client.post("/api/v1/users/", {}), 403, "permission_denied")
    assert "needs the admin role; you are a viewer" in error["message"]


def test_404_and_405(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    _assert_error_shape(api_client.get("/api/v1/users/999999/"), 404, "not_found")
    _assert_error_shape(api_client.put("/api/v1/me/", {}), 405, "method_not_allowed")


def test_unknown_api_path_is_404(api_client, viewer):
    api_client.force_authenticate(viewer)
    error = _assert_error_shape(api_client.get("/api/v1/no-such-thing/"), 404, "not_found")
    assert "/api/v1/docs/" in error["message"]


def test_unexpected_api_failure_is_500_in_the_error_shape(client, admin_user, monkeypatch):
    from accounts.api import views

    def broken(self, request):
        raise RuntimeError("token=do-not-show")

    monkeypatch.setattr(views.MeView, "get", broken)
    client.raise_request_exception = False
    client.force_login(admin_user)
    error = _assert_error_shape(client.get("/api/v1/me/"), 500, "server_error")
    assert "do-not-show" not in error["message"]


def test_lists_are_paginated(api_client, viewer):
    for index in range(7):
        audit_record(action=f"demo.{index}")
    api_client.force_authenticate(viewer)
    body = api_client.get("/api/v1/audit-events/?page_size=3").json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == 7 and len(body["results"]) == 3 and body["next"]
    error = _assert_error_shape(api_client.get("/api/v1/audit-events/?page=99"), 404)
    assert "Invalid page" in error["message"]
    assert api_client.get("/api/v1/audit-events/?page=last&page_size=3").json()["results"]
    for bad in ("page=", "page=0", "page=two", "page_size=", "page_size=501"):
        error = _assert_error_shape(api_client.get(f"/api/v1/audit-events/?{bad}"), 400)
        assert bad.split("=")[0] in error["fields"], error  # the parameter is named, never ignored


def test_schema_is_a_valid_openapi_document(client, viewer):
    client.force_login(viewer)
    response = client.get("/api/v1/schema/")
    assert response.status_code == 200
    document = yaml.safe_load(response.content)
    validate(document)
    assert document["openapi"].startswith("3.")
    for path in ("/api/v1/users/", "/api/v1/me/", "/api/v1/audit-events/"):
        assert path in document["paths"]


def test_schema_generation_has_no_warnings():
    result = subprocess.run(
        [
            str(VENV_BIN / "python"),
            "manage.py",
            "spectacular",
            "--validate",
            "--fail-on-warn",
            "--file",
            "/dev/null",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-4000:]


def test_docs_page_serves_swagger_ui_from_this_server(client, viewer):
    client.force_login(viewer)
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "swagger-ui" in body
    assert "cdn." not in body and "unpkg" not in body and "jsdelivr" not in body
    assert "<script>" not in body  # CSP: the init script is a separate file
