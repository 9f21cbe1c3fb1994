"""Clusters pages render for each role and the register form explains its errors."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from clusters.models import AuthMethod, Cluster, ClusterHealthCheck
from clusters.tests.helpers import closed_port, kubeconfig_text

pytestmark = pytest.mark.django_db
TOKEN = "page-secret-token-abcdef0123"


def _cluster() -> Cluster:
    cluster = Cluster.objects.create(
        name="lab",
        auth_method=AuthMethod.TOKEN,
        server="http://127.0.0.1:1",
        token=TOKEN,
        health_state="degraded",
        last_error="Tandem's credentials may not delete services",
        version="v1.31.0",
        kthena_installed=False,
        permissions=[
            {
                "verb": "delete",
                "group": "",
                "resource": "services",
                "label": "delete services",
                "why": "give each role a stable address",
                "allowed": False,
                "kthena": False,
            }
        ],
        last_checked=timezone.now(),
    )
    cluster.nodes.create(
        name="node-a",
        ready=True,
        accelerator_resource="huawei.com/ascend-1980",
        capacity=8,
        allocatable=8,
        in_use=2,
        seen=timezone.now(),
        accelerators={"huawei.com/ascend-1980": {"capacity": 8, "allocatable": 8, "in_use": 2}},
    )
    ClusterHealthCheck.objects.create(
        cluster=cluster, checked_at=timezone.now(), state="degraded", message="x"
    )
    return cluster


def test_list_shows_health_version_and_accelerators(client, viewer):
    _cluster()
    client.force_login(viewer)
    html = client.get("/clusters/").content.decode()
    assert "state-degraded" in html
    assert "v1.31.0" in html
    assert "2 of 8 in use" in html
    assert "Register a cluster" not in html  # viewers cannot register
    assert TOKEN not in html


def test_list_filters_with_the_shared_filterset(client, viewer):
    _cluster()
    client.force_login(viewer)
    assert "No cluster matches" in client.get("/clusters/?health_state=healthy").content.decode()


def test_the_kthena_filter_takes_true_or_false_and_names_anything_else(client, viewer):
    _cluster()
    client.force_login(viewer)
    api = "/api/v1/clusters/?kthena_installed="
    assert client.get(api + "true").json()["count"] == 0 and client.get(api + "false").json()["count"] == 1
    assert client.get(api).json()["count"] == 1  # empty: the page's "any"
    refused = client.get(api + "null")
    assert refused.status_code == 400
    assert "neither true nor false" in refused.json()["error"]["fields"]["kthena_installed"][0]


def test_detail_shows_nodes_permissions_kthena_and_history(client, viewer):
    cluster = _cluster()
    client.force_login(viewer)
    html = client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "node-a" in html
    assert "6 free" in html
    assert "may not delete services" in html
    assert "verb-denied" in html
    assert "plain Deployments + Services backend" in html
    assert "tick-degraded" in html
    assert TOKEN not in html


def test_register_page_needs_admin(client, operator):
    client.force_login(operator)
    assert client.get("/clusters/register/").status_code == 403


def test_register_form_names_the_contexts_when_the_chosen_one_is_missing(client, admin_user):
    client.force_login(admin_user)
    text = kubeconfig_text(server="http://127.0.0.1:1", contexts=("lab", "prod"))
    response = client.post(
        "/clusters/register/",
        {
            "name": "x",
            "method": "kubeconfig",
            "context": "staging",
            "kubeconfig_file": SimpleUploadedFile("config", text.encode()),
        },
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "context &#x27;staging&#x27; is not in the kubeconfig; it has: lab, prod" in html
    assert '<option value="prod"' in html
    assert not Cluster.objects.exists()


def test_register_form_refuses_exec_plugins(client, admin_user):
    client.force_login(admin_user)
    text = kubeconfig_text(server="https://eks.example.com", user={"exec": {"command": "aws"}})
    html = client.post(
        "/clusters/register/", {"name": "x", "method": "kubeconfig", "kubeconfig": text}
    ).content.decode()
    assert "uses an exec credential plugin (aws)" in html


def test_register_form_token_method_requires_server_and_token(client, admin_user):
    client.force_login(admin_user)
    html = client.post("/clusters/register/", {"name": "x", "method": "token"}).content.decode()
    assert "the API server URL is required" in html
    assert "the bearer token is required" in html


def test_register_form_saves_unreachable_when_asked_and_never_echoes_the_token(client, admin_user):
    client.force_login(admin_user)
    port = closed_port()
    response = client.post(
        "/clusters/register/",
        {
            "name": "later",
            "method": "token",
            "server": f"http://127.0.0.1:{port}",
            "token": TOKEN,
            "allow_unreachable": "on",
        },
        follow=True,
    )
    html = response.content.decode()
    cluster = Cluster.objects.get(name="later")
    assert response.redirect_chain[-1][0] == f"/clusters/{cluster.pk}/"
    assert f"cannot reach http://127.0.0.1:{port}: connection refused" in html
    assert TOKEN not in html


def test_remove_page_lists_what_goes_and_removes(client, admin_user):
    cluster = _cluster()
    client.force_login(admin_user)
    assert "Remove lab?" in client.get(f"/clusters/{cluster.pk}/remove/").content.decode()
    response = client.post(f"/clusters/{cluster.pk}/remove/")
    assert response.status_code == 302
    assert not Cluster.objects.exists()


def test_detail_shows_the_rules_to_add_and_marks_source_only_permissions(client, viewer):
    cluster = _cluster()
    cluster.permissions = [
        *cluster.permissions,
        {
            "verb": "get",
            "group": "",
            "resource": "pods/proxy",
            "label": "get pods/proxy",
            "why": "scrape engine metrics through the API server",
            "allowed": False,
            "kthena": False,
            "only_for": "the API-server proxy metrics source",
        },
    ]
    cluster.save()
    client.force_login(viewer)
    html = client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "(only for the API-server proxy metrics source)" in html
    snippet = (
        "- apiGroups: [&quot;&quot;]\n  resources: [&quot;pods/proxy&quot;]\n  verbs: [&quot;get&quot;]\n"
        "- apiGroups: [&quot;&quot;]\n  resources: [&quot;services&quot;]\n  verbs: [&quot;delete&quot;]"
    )
    assert snippet in html
