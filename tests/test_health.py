"""/healthz says the process serves; /readyz names the dependency that is down."""

from __future__ import annotations

import json

import pytest

from tests.support import closed_port, http_get, subprocess_env, uvicorn_server

pytestmark = pytest.mark.django_db


def test_healthz_is_200_without_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_readyz_is_200_when_database_and_redis_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "redis": "ok"}


def test_readyz_names_redis_when_it_is_down(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"] != "ok"
    assert body["message"].startswith("redis unreachable")
    assert client.get("/healthz").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_server_whose_database_and_redis_are_down_stays_alive_and_says_so():
    env = subprocess_env(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{closed_port()}/tandem",
        REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0",
    )
    with uvicorn_server(env) as base:
        assert http_get(base + "/healthz")[0] == 200
        status, body = http_get(base + "/readyz", timeout=15)
        assert status == 503
        payload = json.loads(body)
        assert payload["status"] == "unavailable"
        assert payload["checks"]["database"] != "ok"
        assert payload["checks"]["redis"] != "ok"
        assert "database unreachable" in payload["message"]
        assert "redis unreachable" in payload["message"]
        assert http_get(base + "/healthz")[0] == 200


def test_probes_by_pod_ip_are_answered_although_the_ip_is_not_an_allowed_host(client, settings):
    settings.ALLOWED_HOSTS = ["tandem.example.com"]
    assert client.get("/healthz", HTTP_HOST="10.244.1.17:8000").status_code == 200
    assert client.get("/readyz", HTTP_HOST="10.244.1.17:8000").status_code == 200
    assert client.get("/accounts/login/", HTTP_HOST="10.244.1.17:8000").status_code == 400
