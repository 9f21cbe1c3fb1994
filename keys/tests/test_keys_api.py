from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from audit.models import AuditEvent
from keys import accounting, tokens
from keys.models import ApiKey, ApiKeySecret


@pytest.fixture
def session():
    def make(user):
        client = APIClient()
        client.force_authenticate(user)
        return client

    return make


def test_create_shows_the_secret_once_with_client_snippets(operator, session):
    response = session(operator).post(
        "/api/v1/keys/", {"name": "ci", "purpose": "automation", "scopes": ["deploy"]}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    secret = body["secret"]
    tokens.parse(secret)
    assert body["key"]["kind"] == "management" and body["key"]["scopes"] == ["deploy"]
    assert body["key"]["secret_prefix"] == secret[:10] and body["key"]["secret_last4"] == secret[-4:]
    assert {s["id"] for s in body["snippets"]} == {"curl", "python", "env"}
    assert all(secret in s["text"] for s in body["snippets"])
    stored = ApiKeySecret.objects.get(key_id=body["key"]["id"])
    assert secret not in (stored.digest, stored.display_prefix)
    again = session(operator).get(f"/api/v1/keys/{body['key']['id']}/")
    assert secret not in again.content.decode() and secret[10:-4] not in again.content.decode()


def test_inference_snippets_spell_each_base_url_as_its_client_wants(operator, session):
    body = (
        session(operator)
        .post(
            "/api/v1/keys/",
            {"name": "cc", "purpose": "coding-assistant", "allowed_models": ["qwen"]},
            format="json",
        )
        .json()
    )
    snippets = {s["id"]: s["text"] for s in body["snippets"]}
    root = body["base_url"]
    assert f'base_url="{root}/v1"' in snippets["openai-python"]
    assert f"OPENAI_BASE_URL={root}/v1" in snippets["env"]
    assert f"{root}/v1/chat/completions" in snippets["curl"]
    assert f"ANTHROPIC_BASE_URL={root}\n" in snippets["claude-code"]
    assert '"openAiBaseUrl": "' + root + '/v1"' in snippets["cline"]
    assert '"OPENAI_API_KEY": "' + body["secret"] + '"' in snippets["codex"]
    assert body["model"] == "qwen"


def test_list_shows_own_keys_to_everyone_and_all_keys_to_admins(viewer, operator, admin_user, session, issue):
    mine = issue(viewer, name="viewer-debug", purpose="debug")
    theirs = issue(operator, name="op-ci")
    listed = session(viewer).get("/api/v1/keys/").json()["results"]
    assert [k["id"] for k in listed] == [str(mine.key.pk)]
    assert session(viewer).get(f"/api/v1/keys/{theirs.key.pk}/").status_code == 404
    assert session(viewer).post(f"/api/v1/keys/{theirs.key.pk}/revoke/", {}, format="json").status_code == 404
    everything = {k["id"] for k in session(admin_user).get("/api/v1/keys/").json()["results"]}
    assert {str(mine.key.pk), str(theirs.key.pk)} <= everything


def test_update_limits_is_audited_with_what_changed(operator, session, issue):
    issued = issue(operator)
    response = session(operator).patch(
        f"/api/v1/keys/{issued.key.pk}/", {"requests_per_minute": 5, "team": "platform"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["requests_per_minute"] == 5
    event = AuditEvent.objects.filter(action="key.update", target_id=str(issued.key.pk)).get()
    assert event.detail["changed"]["requests_per_minute"] == [600, 5]


def test_update_refuses_unknown_and_bad_values_naming_the_field(operator, session, issue):
    issued = issue(operator)
    bad = session(operator).patch(
        f"/api/v1/keys/{issued.key.pk}/", {"requests_per_minute": -1}, format="json"
    )
    assert bad.status_code == 400 and "requests_per_minute" in bad.json()["error"]["fields"]
    bad = session(operator).patch(f"/api/v1/keys/{issued.key.pk}/", {"scopes": ["root"]}, format="json")
    assert bad.status_code == 400 and "unknown scope" in bad.json()["error"]["fields"]["scopes"][0]


def test_rotate_keeps_the_id_and_returns_a_new_secret(operator, session, issue):
    issued = issue(operator)
    response = session(operator).post(
        f"/api/v1/keys/{issued.key.pk}/rotate/", {"grace_seconds": 60}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["key"]["id"] == str(issued.key.pk)
    assert response.json()["secret"] != issued.secret
    assert response.json()["key"]["previous_secret_stops_at"] is not None
    assert AuditEvent.objects.filter(action="key.rotate", target_id=str(issued.key.pk)).exists()


def test_revoke_is_final(operator, session, issue):
    issued = issue(operator)
    client = session(operator)
    assert (
        client.post(f"/api/v1/keys/{issued.key.pk}/revoke/", {"reason": "left"}, format="json").json()[
            "status"
        ]
        == "revoked"
    )
    again = client.post(f"/api/v1/keys/{issued.key.pk}/rotate/", {}, format="json")
    assert again.status_code == 409
    assert client.patch(f"/api/v1/keys/{issued.key.pk}/", {"name": "x"}, format="json").status_code == 409


def test_delete_is_not_offered(operator, session, issue):
    issued = issue(operator)
    assert session(operator).delete(f"/api/v1/keys/{issued.key.pk}/").status_code == 405


def test_purposes_list_the_templates(viewer, session):
    names = [p["name"] for p in session(viewer).get("/api/v1/keys/purposes/").json()]
    assert names[:5] == ["debug", "production", "fallback", "coding-assistant", "automation"]


def test_usage_history_comes_from_the_rollup(operator, session, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    for _ in range(3):
        assert (
            key_client(issued.secret).get("/api/v1/topologies/", REMOTE_ADDR="203.0.113.5").status_code == 200
        )
    accounting.key_usage_rollup()
    rows = session(operator).get(f"/api/v1/keys/{issued.key.pk}/usage/?hours=2").json()
    assert sum(row["requests"] for row in rows) == 3
    issued.key.refresh_from_db()
    assert issued.key.last_used_ip == "203.0.113.5" and issued.key.last_used_at is not None
    accounting.key_usage_rollup()  # idempotent: totals, not increments
    assert (
        sum(r["requests"] for r in session(operator).get(f"/api/v1/keys/{issued.key.pk}/usage/").json()) == 3
    )
    bad = session(operator).get(f"/api/v1/keys/{issued.key.pk}/usage/?hours=²")
    assert bad.status_code == 400 and "hours" in bad.json()["error"]["fields"]


def test_budget_thresholds_alert_once_per_window(operator, issue, key_client):
    from keys import limits

    issued = issue(operator, scopes=["topologies:read"], limits_given={"requests_per_day": 10})
    client = key_client(issued.secret)
    for _ in range(10):
        client.get("/api/v1/topologies/")
    fired = limits.client().smembers(limits.counter_key(str(issued.key.pk), "alerts", "fired"))
    labels = sorted(value.decode() for value in fired)
    assert [label.rsplit(":", 1)[1] for label in labels] == ["80", "95"]
    assert all(label.startswith("requests_per_day:") for label in labels)
    for label in labels * 2:  # a task delivered twice records once
        accounting.key_budget_alert_record(key_id=str(issued.key.pk), crossed=label)
    alerts = AuditEvent.objects.filter(action="key.budget_alert", target_id=str(issued.key.pk))
    assert sorted(a.detail["percent"] for a in alerts) == [80, 95]


def test_schema_declares_the_bearer_scheme(viewer, session):
    import yaml

    schema = yaml.safe_load(session(viewer).get("/api/v1/schema/").content)
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert "/api/v1/keys/{id}/rotate/" in schema["paths"]


def test_schema_needs_a_login(api_client, db):
    assert api_client.get("/api/v1/schema/").status_code == 401


def test_the_command_prints_only_the_secret(operator, capsys):
    out = StringIO()
    call_command(
        "create_api_key",
        "--user",
        operator.username,
        "--purpose",
        "automation",
        "--kind",
        "management",
        "--scopes",
        "deploy,topologies:read",
        "--expires-in",
        "30d",
        stdout=out,
    )
    secret = out.getvalue().strip()
    assert tokens.parse(secret).kind == "management"
    key = ApiKey.objects.get(owner=operator)
    assert key.scopes == ["deploy", "topologies:read"]
    assert 29 <= (key.expires_at - key.created).days <= 30
