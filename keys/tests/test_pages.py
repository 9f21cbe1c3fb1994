"""The Keys pages in the Django test client: list, create from a purpose, shown-once secret, key page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from keys import services
from keys.models import ApiKey, ApiKeyUsage

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def secrets_in(html: str) -> list[str]:
    return re.findall(r"tdm_[mi]_[0-9A-Za-z]{36}", html)


def create_form(client: Client, purpose: str) -> dict[str, str | list[str]]:
    """The create form's fields as the browser would send them, prefilled values included."""
    html = client.get(f"/keys/new/{purpose}/").content.decode()
    data: dict[str, str | list[str]] = {}
    for name, value in re.findall(r'<input type="(?:text|number|hidden)" name="(\w+)" value="([^"]*)"', html):
        data[name] = value
    data["scopes"] = re.findall(r'<input type="checkbox" name="scopes" value="([^"]*)"[^>]*checked', html)
    data["kind"] = re.search(r'<option value="(\w+)" selected>', html).group(1)
    return data


def test_list_groups_keys_by_purpose_with_status_scopes_expiry_and_last_use(operator, issue):
    ci = issue(operator, name="ci-deploy", purpose="automation", scopes=["deploy", "topologies:read"]).key
    issue(operator, name="try-new-model", purpose="debug")
    old = issue(operator, name="old-prod", purpose="production").key
    services.key_revoke(key=old, actor=operator)
    ApiKey.objects.filter(pk=ci.pk).update(last_used_at=timezone.now(), last_used_ip="192.0.2.7")
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    ApiKeyUsage.objects.create(key=ci, hour=hour, requests=40, tokens=0)
    ApiKeyUsage.objects.create(key=ci, hour=hour - timedelta(hours=3), requests=10, tokens=0)

    html = login(operator).get("/keys/").content.decode()

    headings = re.findall(r'<h2 id="group-\d+">([^<]+) <span', html)
    assert headings == ["Debug", "Production", "Automation (CI)"]
    assert 'class="state state-ok"' in html and ">active<" in html
    assert 'class="state state-bad"' in html and ">revoked<" in html
    assert '<span class="badge scope">deploy</span>' in html
    assert "expires in 7 days" in html
    assert "from 192.0.2.7" in html
    assert "50 requests in 24 h" in html
    assert "<polyline points=" in html
    assert "cannot issue API keys" not in html


def test_viewer_sees_only_their_own_keys(viewer, operator, issue):
    issue(operator, name="operators-secret-key", purpose="automation", scopes=["deploy"])
    issue(viewer, name="viewer-debug", purpose="debug")
    html = login(viewer).get("/keys/").content.decode()
    assert "viewer-debug" in html
    assert "operators-secret-key" not in html
    # even when asking for the other user by name
    assert "operators-secret-key" not in login(viewer).get("/keys/?owner=operator-user").content.decode()


def test_viewer_cannot_open_rotate_or_revoke_another_users_key(viewer, operator, issue):
    key = issue(operator, name="ops", purpose="automation", scopes=["deploy"]).key
    client = login(viewer)
    for path in (f"/keys/{key.pk}/", f"/keys/{key.pk}/rotate/", f"/keys/{key.pk}/revoke/"):
        assert client.get(path).status_code == 404, path
    response = client.post(f"/keys/{key.pk}/revoke/", {"confirm": "on"})
    assert response.status_code == 404
    response = client.post(f"/keys/{key.pk}/rotate/", {"form_id": "x", "grace": "0"})
    assert response.status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None and key.secrets.count() == 1


def test_admin_sees_everyones_keys_with_their_owner(admin_user, operator, viewer, issue):
    issue(operator, name="ops-key", purpose="automation", scopes=["deploy"])
    issue(viewer, name="viewer-key", purpose="debug")
    html = login(admin_user).get("/keys/").content.decode()
    assert "ops-key" in html and "viewer-key" in html
    assert "operator-user" in html and "viewer-user" in html
    assert "As an admin you see every user's keys." in html
    assert "viewer-key" not in login(admin_user).get("/keys/?owner=operator-user").content.decode()


def test_list_filters_with_the_api_filterset_and_refuses_bad_values_in_words(operator, issue):
    issue(operator, name="debug-one", purpose="debug")
    revoked = issue(operator, name="gone", purpose="production").key
    services.key_revoke(key=revoked, actor=operator)
    client = login(operator)
    html = client.get("/keys/?status=revoked").content.decode()
    assert "gone" in html and "debug-one" not in html
    html = client.get("/keys/?purpose=debug").content.decode()
    assert "debug-one" in html and "gone" not in html
    response = client.get("/keys/?status=sideways")
    assert response.status_code == 200
    assert "Pick a value from the list" in response.content.decode()


def test_empty_list_says_how_to_start(viewer):
    html = login(viewer).get("/keys/").content.decode()
    assert "No API keys yet" in html and 'href="/keys/new/"' in html


def test_purpose_picker_and_form_prefilled_from_the_purpose(viewer, operator):
    html = login(viewer).get("/keys/new/").content.decode()
    for purpose in ("debug", "production", "fallback", "coding-assistant", "automation", "custom"):
        assert f'href="/keys/new/{purpose}/"' in html
    debug = create_form(login(viewer), "debug")
    assert debug["kind"] == "inference"
    assert debug["expires_in_days"] == "7"
    assert debug["requests_per_minute"] == "30"
    assert debug["requests_per_day"] == "1000"
    assert debug["scopes"] == ["inference"]
    auto = create_form(login(operator), "automation")
    assert auto["kind"] == "management" and auto["expires_in_days"] == "90"
    assert login(viewer).get("/keys/new/nonsense/").status_code == 404


def test_scopes_offered_are_those_the_role_may_hold(viewer, operator):
    viewer_form = login(viewer).get("/keys/new/automation/").content.decode()
    operator_form = login(operator).get("/keys/new/automation/").content.decode()
    assert 'value="topologies:read"' in viewer_form
    assert 'value="deploy"' not in viewer_form and 'value="clusters:write"' not in viewer_form
    assert 'value="deploy"' in operator_form and 'value="clusters:write"' not in operator_form
    assert "your role (viewer)" in viewer_form


def test_viewer_cannot_post_a_scope_beyond_their_role(viewer):
    client = login(viewer)
    data = create_form(client, "automation") | {"name": "sneaky", "scopes": "deploy"}
    response = client.post("/keys/new/automation/", data)
    assert response.status_code == 400
    assert ApiKey.objects.count() == 0
    assert re.search(
        r'id="field-scopes".*?field-error">Select a valid choice', response.content.decode(), re.S
    )


def test_create_shows_the_secret_once_with_no_store_and_the_three_things(operator, monkeypatch):
    client = login(operator)
    data = create_form(client, "automation") | {"name": "ci-deploy"}
    response = client.post("/keys/new/automation/", data)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    html = response.content.decode()
    found = set(secrets_in(html))
    assert len(found) == 1
    secret = found.pop()
    assert secret.startswith("tdm_m_")
    key = ApiKey.objects.get(name="ci-deploy")
    assert key.owner == operator and key.purpose == "automation"
    assert sorted(key.scopes) == ["deploy", "telemetry:read", "topologies:read"]
    assert "it is shown only this once" in html
    assert 'data-copy="secret"' in html
    assert "http://testserver/api/v1" in html  # the base URL a management client needs
    for label in ("curl", "Python (requests)", "Environment variables (CI secrets)"):
        assert f"<h3>{label}</h3>" in html
    # the secret is never kept for later: not in the session, not on any page after this one
    session = client.session
    assert secret not in str(dict(session.items()))
    for path in ("/keys/", f"/keys/{key.pk}/", "/activity/"):
        assert secret not in client.get(path).content.decode(), path


def test_sending_the_create_form_again_issues_nothing_and_shows_no_secret(operator):
    client = login(operator)
    data = create_form(client, "debug") | {"name": "reloaded"}
    first = client.post("/keys/new/debug/", data)
    assert len(set(secrets_in(first.content.decode()))) == 1
    again = client.post("/keys/new/debug/", data, follow=True)
    assert ApiKey.objects.filter(name="reloaded").count() == 1
    html = again.content.decode()
    assert not secrets_in(html)
    assert again.redirect_chain[-1][0] == f"/keys/{ApiKey.objects.get(name='reloaded').pk}/"
    assert "a secret is never shown twice" in html


def test_inference_key_gets_v1_base_url_model_and_client_snippets(operator):
    client = login(operator)
    data = create_form(client, "coding-assistant") | {
        "name": "claude-code-ada",
        "allowed_models": "qwen3-32b",
    }
    html = client.post("/keys/new/coding-assistant/", data).content.decode()
    assert '<code id="base-url">http://testserver/v1</code>' in html
    assert '<code id="model-id">qwen3-32b</code>' in html
    labels = (
        "curl",
        "openai (Python SDK): chat completions and the Responses API",
        "Environment variables",
        "Claude Code 2.1.332 (environment; its small/fast model too)",
        "Codex 0.171.0 (~/.codex/config.toml and ~/.codex/auth.json)",
    )
    for label in labels:
        assert f"<h3>{label}</h3>" in html
    assert "ANTHROPIC_BASE_URL=http://testserver\n" in html


def test_expiry_beyond_the_purpose_cap_is_refused_next_to_the_field(viewer):
    client = login(viewer)
    data = create_form(client, "debug") | {"name": "too-long", "expires_in_days": "30"}
    response = client.post("/keys/new/debug/", data)
    assert response.status_code == 400
    html = response.content.decode()
    field = re.search(r'<div class="field has-error" id="field-expires_in_days">.*?</div>', html, re.S)
    assert field, html
    assert "Debug keys live at most 7 days; choose 7 or fewer" in field.group(0)
    assert field.group(0).count("at most 7 days") == 1, "the cap is said twice (help and error)"
    assert html.count("at most 7 days") == 1
    assert not ApiKey.objects.exists()


def test_a_field_without_an_error_keeps_its_help_and_a_missing_name_says_what_to_give(viewer):
    client = login(viewer)
    data = create_form(client, "debug") | {"name": ""}
    html = client.post("/keys/new/debug/", data).content.decode()
    name = re.search(r'id="field-name">.*?</div>', html, re.S)
    assert name and "Give the key a name saying where it is used, e.g. ci-deploy." in name.group(0)
    assert "Say where it is used" not in name.group(0)
    expiry = re.search(r'id="field-expires_in_days">.*?</div>', html, re.S)
    assert expiry and '<p class="help">Debug keys live at most 7 days.</p>' in expiry.group(0)


def test_service_errors_show_next_to_their_fields(operator):
    client = login(operator)
    data = create_form(client, "production") | {"name": "prod", "allowed_cidrs": "10.0.0.0/8 not-a-net"}
    html = client.post("/keys/new/production/", data).content.decode()
    assert re.search(
        r'id="field-allowed_cidrs".*?field-error">.*?not-a-net.*?use e.g. 10.0.0.0/8', html, re.S
    )
    data = create_form(client, "automation") | {"name": "mixed", "kind": "inference", "scopes": "deploy"}
    html = client.post("/keys/new/automation/", data).content.decode()
    assert re.search(r'id="field-scopes".*?field-error">deploy does not fit an? inference key', html, re.S)
    data = create_form(client, "production") | {"name": "", "alert_thresholds": "80, lots"}
    html = client.post("/keys/new/production/", data).content.decode()
    assert "Give whole percentages separated by commas" in html
    assert "The key was not created: fix “Name”, “Budget alerts at (%)” below." in html
    assert not ApiKey.objects.exists()


def test_custom_purpose_needs_its_label(viewer):
    client = login(viewer)
    data = create_form(client, "custom") | {"name": "load"}
    response = client.post("/keys/new/custom/", data)
    assert response.status_code == 400 and re.search(
        r'id="field-purpose_label".*?field-error', response.content.decode(), re.S
    )
    data["purpose_label"] = "load-test"
    assert client.post("/keys/new/custom/", data).status_code == 200
    assert ApiKey.objects.get(name="load").purpose_display == "load-test"


JUNK = [
    {},
    {"name": "x" * 500, "kind": "sideways", "expires_in_days": "1e9", "scopes": ["nope"]},
    {"name": "tab\tname\u200b", "expires_in_days": "99999999999999999999", "requests_per_day": "-1"},
    {"name": "big", "expires_in_days": "3", "requests_per_minute": str(10**30), "alert_thresholds": "0, 101"},
    {"name": "many", "expires_in_days": "3", "allowed_models": " ".join(f"m{i}" for i in range(150))},
    {"name": "nul\x00", "expires_in_days": "3", "allowed_cidrs": "10.0.0.0/33 ::1/200", "form_id": "y" * 300},
]


@pytest.mark.parametrize("junk", JUNK)
def test_no_input_to_the_create_form_gets_a_500(viewer, junk):
    client = login(viewer)
    base = create_form(client, "debug")
    response = client.post("/keys/new/debug/", base | junk)
    assert response.status_code in (200, 400), response.status_code
    if response.status_code == 400:
        assert "The key was not created" in response.content.decode()


def test_no_input_to_rotate_revoke_or_the_filters_gets_a_500(viewer, issue):
    key = issue(viewer, purpose="debug").key
    client = login(viewer)
    assert client.post(f"/keys/{key.pk}/rotate/", {"grace": "forever"}).status_code == 400
    assert client.post(f"/keys/{key.pk}/rotate/", {"grace": "-5"}).status_code == 400
    assert client.post(f"/keys/{key.pk}/revoke/", {"reason": "r" * 900, "confirm": "on"}).status_code == 400
    for query in ("q=%00", "purpose=../../etc", "owner=" + "o" * 2000, "page=-3", "page=zz"):
        assert client.get(f"/keys/?{query}").status_code == 200, query
    assert client.get("/keys/not-a-uuid/").status_code == 404
    assert client.get("/keys/00000000-0000-0000-0000-000000000000/").status_code == 404
