"""The key page (settings, counters, usage, audit trail), rotate and revoke with their confirmations,
and key events on the Activity page."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from keys import accounting, services
from keys.models import ApiKey, ApiKeyUsage

pytestmark = pytest.mark.django_db
SECRET_RE = r"tdm_[mi]_[0-9A-Za-z]{36}"


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def rotate_form_id(client: Client, key: ApiKey) -> str:
    html = client.get(f"/keys/{key.pk}/rotate/").content.decode()
    return re.search(r'name="form_id" value="(\w+)"', html).group(1)


def test_rotate_asks_first_with_24_hours_of_grace_preselected(operator, issue):
    key = issue(operator, scopes=["topologies:read"]).key
    html = login(operator).get(f"/keys/{key.pk}/rotate/").content.decode()
    assert "Rotate ci-deploy?" in html
    assert '<option value="86400" selected>24 hours (default)</option>' in html
    assert '<option value="0">None: the old secret stops at once</option>' in html
    assert key.secrets.count() == 1  # asking changed nothing


def test_rotate_shows_the_new_secret_once_and_the_old_one_works_through_its_grace(
    operator, issue, key_client
):
    issued = issue(operator, scopes=["topologies:read"])
    client = login(operator)
    response = client.post(
        f"/keys/{issued.key.pk}/rotate/", {"form_id": rotate_form_id(client, issued.key), "grace": "86400"}
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    html = response.content.decode()
    (new,) = set(re.findall(SECRET_RE, html))
    assert new != issued.secret
    assert "New secret for ci-deploy" in html and "keeps working until" in html
    assert key_client(issued.secret).get("/api/v1/me/").status_code == 200
    assert key_client(new).get("/api/v1/me/").status_code == 200
    page = client.get(f"/keys/{issued.key.pk}/").content.decode()
    assert "in grace" in page and new not in page


def test_rotate_with_no_grace_stops_the_old_secret_at_once(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    client = login(operator)
    form_id = rotate_form_id(client, issued.key)
    html = client.post(f"/keys/{issued.key.pk}/rotate/", {"form_id": form_id, "grace": "0"}).content.decode()
    assert "The previous secret stopped working at once." in html
    (new,) = set(re.findall(SECRET_RE, html))
    assert key_client(issued.secret).get("/api/v1/me/").status_code == 401
    assert key_client(new).get("/api/v1/me/").status_code == 200
    # sending the same rotation again (a reload) rotates nothing and shows no secret
    again = client.post(f"/keys/{issued.key.pk}/rotate/", {"form_id": form_id, "grace": "0"}, follow=True)
    assert not re.findall(SECRET_RE, again.content.decode())
    assert issued.key.secrets.count() == 2
    assert key_client(new).get("/api/v1/me/").status_code == 200


def test_rotating_an_expired_key_says_why_not(operator, issue):
    key = issue(operator, scopes=["topologies:read"]).key
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    client = login(operator)
    response = client.post(f"/keys/{key.pk}/rotate/", {"form_id": rotate_form_id(client, key), "grace": "0"})
    assert response.status_code == 400
    assert "only active keys can be rotated. Create a new key." in response.content.decode()


def test_revoke_needs_the_confirmation_box_then_stops_the_key(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    client = login(operator)
    assert "cannot be undone" in client.get(f"/keys/{issued.key.pk}/revoke/").content.decode()
    response = client.post(f"/keys/{issued.key.pk}/revoke/", {"reason": "leaked"})
    assert response.status_code == 400
    assert "Tick the box to confirm; revocation cannot be undone." in response.content.decode()
    issued.key.refresh_from_db()
    assert issued.key.revoked_at is None

    response = client.post(
        f"/keys/{issued.key.pk}/revoke/", {"reason": "leaked in a CI log", "confirm": "on"}
    )
    assert response.status_code == 302 and response["Location"] == f"/keys/{issued.key.pk}/"
    assert key_client(issued.secret).get("/api/v1/me/").status_code == 401
    page = client.get(f"/keys/{issued.key.pk}/").content.decode()
    assert "every request with it is refused from now on" in page
    assert 'class="state state-bad"' in page and "leaked in a CI log" in page
    assert "Rotate…" not in page and "Revoke…" not in page


def test_key_page_shows_settings_counters_usage_and_its_audit_trail(operator, issue, key_client):
    issued = issue(
        operator,
        name="assistant",
        purpose="coding-assistant",
        limits_given={"requests_per_day": 100, "requests_per_minute": 60},
    )
    key = issued.key
    services.key_update(key=key, actor=operator, changes={"requests_per_minute": 30})
    services.key_update(key=key, actor=operator, changes={"allowed_cidrs": ["10.0.0.0/8"]})
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    ApiKeyUsage.objects.create(key=key, hour=hour - timedelta(hours=2), requests=12, tokens=3400, denied=1)
    accounting.key_budget_alert_record(key_id=str(key.pk), crossed="requests_per_day:20261201:80")
    other = issue(operator, name="other", scopes=["topologies:read"]).key

    html = login(operator).get(f"/keys/{key.pk}/").content.decode()

    assert "<h1>assistant" in html and 'class="state state-ok"' in html
    assert "Coding assistant" in html and "10.0.0.0/8" in html
    assert "requests today" in html and "/ 100" in html
    assert "requests this minute" in html and "/ 30" in html
    data = json.loads(
        re.search(r'<script id="key-usage-data" type="application/json">(.*?)</script>', html).group(1)
    )
    # used only two hours ago: the chart starts at the first use (at least 6 hours), not a week back
    assert len(data["hours"]) == len(data["requests"]) == 6
    assert data["hours"][-1] - data["hours"][0] == 5 * 3600
    assert data["hours"][-1] == int(hour.timestamp())
    # two hours before the current one
    assert data["requests"][-3] == 12 and data["tokens"][-3] == 3400 and data["denied"][-3] == 1
    assert sum(data["requests"]) == 12 and sum(data["tokens"]) == 3400
    assert "Usage per hour, last 6 hours" in html and 'href="?usage=week#usage"' in html
    week = login(operator).get(f"/keys/{key.pk}/?usage=week").content.decode()
    whole = json.loads(
        re.search(r'<script id="key-usage-data" type="application/json">(.*?)</script>', week).group(1)
    )
    assert len(whole["hours"]) == 168 and whole["hours"][-1] - whole["hours"][0] == 167 * 3600
    assert whole["requests"][-3] == 12 and sum(whole["requests"]) == 12
    assert "Usage per hour, last 7 days" in week and "Show from the first use" in week
    trail = html.split("<h2>Audit trail</h2>", 1)[1]
    for action in ("key.create", "key.update", "key.budget_alert"):
        assert f"<code>{action}</code>" in trail
    assert "requests per minute: 60 → 30" in trail
    assert "allowed cidrs: none → 10.0.0.0/8" in trail
    # times in the browser's zone like the Activity page and the charts (UTC when script is off)
    assert "When (local time)" in trail and "When (UTC)" not in trail
    assert re.search(
        r'<td><time data-local="seconds" datetime="[^"]+\+00:00" title="[^"]+ UTC">[^<]+ UTC</time>', trail
    )
    assert '<dt>Created</dt><dd><time data-local="minutes"' in html
    assert "js/local-time.js" in html
    assert trail.count('<tr class="event-') == 4  # only this key's events: create, 2 updates, the alert
    assert str(other.pk) not in trail


def test_the_usage_chart_spans_the_week_when_the_key_was_used_days_ago(operator, issue):
    key = issue(operator, name="steady", scopes=["topologies:read"]).key
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    ApiKeyUsage.objects.create(key=key, hour=hour - timedelta(hours=30), requests=3, tokens=0, denied=0)
    ApiKeyUsage.objects.create(key=key, hour=hour, requests=5, tokens=0, denied=0)
    html = login(operator).get(f"/keys/{key.pk}/").content.decode()
    data = json.loads(
        re.search(r'<script id="key-usage-data" type="application/json">(.*?)</script>', html).group(1)
    )
    assert len(data["hours"]) == 31 and data["requests"][0] == 3 and data["requests"][-1] == 5
    assert "Usage per hour, last 31 hours" in html


def test_key_page_shows_an_exhausted_quota_and_when_it_resets(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"], limits_given={"requests_per_day": 1})
    client = key_client(issued.secret)
    assert client.get("/api/v1/me/").status_code == 200
    assert client.get("/api/v1/me/").status_code == 429
    html = login(operator).get(f"/keys/{issued.key.pk}/").content.decode()
    assert 'class="state state-warn"' in html and ">exhausted<" in html
    assert "requests per day used up (1 of 1); resets" in html
    listing = login(operator).get("/keys/").content.decode()
    assert ">exhausted<" in listing


def test_failed_authentication_with_a_known_key_lands_in_its_trail(operator, issue, key_client):
    issued = issue(operator, scopes=["topologies:read"])
    services.key_revoke(key=issued.key, actor=operator, reason="rotated by hand")
    assert key_client(issued.secret).get("/api/v1/topologies/").status_code == 401
    html = login(operator).get(f"/keys/{issued.key.pk}/").content.decode()
    trail = html.split("<h2>Audit trail</h2>", 1)[1]
    assert "<code>key.auth_failed</code>" in trail and "request refused" in trail
    assert issued.secret not in html


def test_activity_page_links_key_events_to_the_key_and_reads_them_plainly(admin_user, operator, issue):
    issued = issue(operator, scopes=["deploy", "topologies:read"])
    services.key_update(key=issued.key, actor=operator, changes={"scopes": ["topologies:read"]})
    html = login(admin_user).get("/activity/").content.decode()
    assert f'<a href="/keys/{issued.key.pk}/">ci-deploy</a>' in html
    assert "<code>key.scopes_change</code>" in html and "scopes changed" in html
    assert "scopes: deploy, topologies:read → topologies:read" in html
    assert "key created" in html
    assert issued.secret not in html
