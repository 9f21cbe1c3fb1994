"""A refused registration is in Activity (without the credential); registering an API server that is
already registered warns, on the page and in the API."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from clusters.services import cluster_register
from clusters.tests.helpers import closed_port
from controlplane.api.errors import DomainError

pytestmark = pytest.mark.django_db
TOKEN = "secret-token-value-123"


def test_a_refused_registration_is_recorded_without_the_token(admin_user, client):
    with pytest.raises(DomainError):
        cluster_register(name="x", server="http://10.1.2.3:8080", token=TOKEN, actor=admin_user)
    event = AuditEvent.objects.get(action="cluster.register_failed")
    assert event.actor_label == admin_user.username
    assert event.detail["server"] == "http://10.1.2.3:8080" and event.detail["credentials"] == "token"
    assert "https:// only" in event.detail["error"] and "server" in event.detail["fields"]
    assert TOKEN not in str(event.detail)
    client.force_login(admin_user)
    page = client.get("/activity/").content.decode()
    assert "registration refused" in page and TOKEN not in page


def test_the_same_server_twice_warns_on_the_page(client, admin_user):
    client.force_login(admin_user)
    server = f"http://127.0.0.1:{closed_port()}"
    body = {"method": "token", "server": server, "token": TOKEN, "allow_unreachable": "on"}
    first = client.post("/clusters/register/", {**body, "name": "first"}, follow=True).content.decode()
    assert "already registered" not in first
    second = client.post("/clusters/register/", {**body, "name": "second"}, follow=True).content.decode()
    assert f"{server} is already registered as first" in second


def test_the_same_server_twice_warns_in_the_api(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    server = f"http://127.0.0.1:{closed_port()}"
    body = {"server": server, "token": TOKEN, "allow_unreachable": True}
    first = api_client.post("/api/v1/clusters/", {**body, "name": "one"}, format="json")
    assert first.status_code == 201, first.json()
    assert first.json()["warnings"] == []
    second = api_client.post(
        "/api/v1/clusters/", {**body, "name": "two", "server": server + "/"}, format="json"
    )
    assert second.status_code == 201
    assert "is already registered as one" in second.json()["warnings"][0]
