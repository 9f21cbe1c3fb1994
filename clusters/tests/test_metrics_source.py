"""Choosing a cluster's metrics source: validation, the registration probe, encrypted Prometheus
credentials, and what the API and the cluster page show."""

from __future__ import annotations

import socket

import pytest
from django.db import connection

from clusters.metrics import SourceResult, recommend
from clusters.models import Cluster

pytestmark = pytest.mark.django_db
SECRET = "prom-token-very-secret"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raw(cluster_id: int, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM clusters_cluster WHERE id = %s", [cluster_id])  # noqa: S608
        return cursor.fetchone()[0]


def test_recommends_the_first_source_that_answered():
    results = {
        "direct": SourceResult(ok=False, message="unreachable"),
        "proxy": SourceResult(ok=True, message="read /metrics"),
        "prometheus": SourceResult(ok=True, message="answers"),
    }
    assert recommend(results)[0] == "proxy"
    results["direct"] = SourceResult(ok=True, message="read")
    assert recommend(results)[0] == "direct"
    nothing = {k: SourceResult(ok=False, message=f"{k} failed") for k in ("direct", "proxy", "prometheus")}
    chosen, reason = recommend(nothing)
    assert chosen == "proxy" and "direct failed" in reason and "pods/proxy" in reason


def test_prometheus_source_without_a_url_names_the_field(api_client, admin_user, sandbox_cluster):
    api_client.force_login(admin_user)
    answer = api_client.post(
        "/api/v1/clusters/",
        {
            "name": "p",
            "server": sandbox_cluster.server,
            "token": sandbox_cluster.token,
            "metrics_source": "prometheus",
        },
        format="json",
    )
    assert answer.status_code == 400
    assert "prometheus_url" in answer.json()["error"]["fields"]
    wrong = api_client.post(
        "/api/v1/clusters/",
        {
            "name": "p",
            "server": sandbox_cluster.server,
            "token": sandbox_cluster.token,
            "metrics_source": "scrape",
        },
        format="json",
    )
    assert wrong.status_code == 400
    assert "metrics_source" in wrong.json()["error"]["fields"]


def test_registration_probes_keeps_the_explicit_choice_and_encrypts_prometheus_credentials(
    api_client, admin_user, sandbox_cluster
):
    api_client.force_login(admin_user)
    url = f"http://127.0.0.1:{_closed_port()}"
    answer = api_client.post(
        "/api/v1/clusters/",
        {
            "name": "with-prom",
            "server": sandbox_cluster.server,
            "token": sandbox_cluster.token,
            "metrics_source": "prometheus",
            "prometheus_url": url,
            "prometheus_token": SECRET,
        },
        format="json",
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["metrics_source"] == "prometheus" and body["prometheus_url"] == url
    assert SECRET not in answer.content.decode()
    probe = body["metrics_probe"]
    assert probe["results"]["prometheus"]["ok"] is False
    assert probe["results"]["prometheus"]["message"].startswith(f"Prometheus at {url} unreachable")
    assert probe["results"]["proxy"]["ok"] is True
    cluster = Cluster.objects.get(pk=body["id"])
    assert cluster.prometheus_token == SECRET
    assert SECRET not in _raw(cluster.pk, "prometheus_token")
    page = api_client.get(f"/clusters/{cluster.pk}/")
    html = page.content.decode()
    assert 'data-metrics-source="prometheus"' in html and f"Prometheus at {url} unreachable" in html
    assert SECRET not in html


def test_changing_the_source_probes_again_and_auto_takes_the_recommendation(
    api_client, admin_user, sandbox_cluster
):
    api_client.force_login(admin_user)
    created = api_client.post(
        "/api/v1/clusters/",
        {
            "name": "chg",
            "server": sandbox_cluster.server,
            "token": sandbox_cluster.token,
            "metrics_source": "direct",
        },
        format="json",
    ).json()
    assert created["metrics_source"] == "direct"
    changed = api_client.patch(
        f"/api/v1/clusters/{created['id']}/", {"metrics_source": "auto"}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["metrics_source"] == changed.json()["metrics_probe"]["recommended"]
    reprobed = api_client.post(f"/api/v1/clusters/{created['id']}/probe-metrics/")
    assert (
        reprobed.status_code == 200
        and reprobed.json()["metrics_probe"]["checked"] >= created["metrics_probe"]["checked"]
    )
