"""Every REST endpoint needs a scope, read off the URL conf: a new endpoint without one fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from keys import services
from keys.endpoint_scopes import endpoint_scopes, markdown_table
from keys.scopes import ANY_SCOPE, MANAGEMENT_SCOPES

ROWS = endpoint_scopes()
DOC = Path(__file__).resolve().parents[2] / "docs" / "api-keys.md"


def test_the_table_covers_the_api():
    paths = {row.path for row in ROWS}
    assert {"/api/v1/keys/", "/api/v1/topologies/{pk}/deploy/", "/api/v1/clusters/"} <= paths
    assert len(ROWS) > 40


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.method} {r.path}")
def test_every_endpoint_declares_a_scope(row):
    assert row.scope is not None, f"{row.method} {row.path} ({row.view}) declares no required_scopes"


def test_the_docs_carry_the_table_as_served():
    assert markdown_table() in DOC.read_text(), "regenerate with: python manage.py keys_scope_table"


def _url(path: str) -> str:
    return path.replace("{pk}", "1").replace("{number}", "1")


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r.scope != ANY_SCOPE], ids=lambda r: f"{r.method} {r.path}"
)
def test_a_key_without_the_scope_is_refused_and_told_which(row, admin_user, key_client):
    scopes = sorted(MANAGEMENT_SCOPES - {row.scope})
    issued = services.key_create(
        actor=admin_user, name="all-but-one", purpose="automation", scopes=scopes, limits_given={}
    )
    response = key_client(issued.secret).generic(row.method, _url(row.path), "{}", "application/json")
    assert response.status_code == 403, (row, response.content)
    assert f"`{row.scope}`" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r.method == "GET" and r.scope != ANY_SCOPE], ids=lambda r: f"GET {r.path}"
)
def test_a_key_with_the_scope_gets_past_the_scope_check(row, admin_user, key_client):
    issued = services.key_create(actor=admin_user, name="one", purpose="automation", scopes=[row.scope])
    response = key_client(issued.secret).get(_url(row.path))
    assert response.status_code in (200, 404), (row, response.content)
