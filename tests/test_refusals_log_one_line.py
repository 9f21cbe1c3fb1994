"""A routine refusal (403) is logged as one line at most: no traceback follows it."""

from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from keys import services


def _refusals(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "status_code", None) == 403]


@pytest.mark.django_db
def test_a_viewer_opening_an_admin_page_logs_one_line_without_a_traceback(client, viewer, caplog):
    client.force_login(viewer)
    with caplog.at_level(logging.INFO):
        response = client.get("/clusters/register/")
    assert response.status_code == 403
    refusals = _refusals(caplog)
    assert len(refusals) == 1
    assert refusals[0].levelno <= logging.WARNING
    assert refusals[0].exc_info is None and not refusals[0].exc_text
    assert "/clusters/register/" in refusals[0].getMessage()


@pytest.mark.django_db
def test_an_api_call_without_the_scope_logs_one_line_without_a_traceback(admin_user, caplog):
    issued = services.key_create(
        actor=admin_user, owner=admin_user, name="read-only", purpose="automation", scopes=["clusters:read"]
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    with caplog.at_level(logging.INFO):
        response = client.post("/api/v1/clusters/", {}, format="json")
    assert response.status_code == 403
    refusals = _refusals(caplog)
    assert len(refusals) == 1
    assert refusals[0].exc_info is None and not refusals[0].exc_text
