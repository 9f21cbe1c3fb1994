"""PATCH of context_name alone switches a kubeconfig cluster to that context (tested like a
registration), and is refused with the reason otherwise; it is never silently ignored."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from clusters.models import Cluster
from clusters.tests.helpers import closed_port, kubeconfig_text

pytestmark = pytest.mark.django_db
URL = "/api/v1/clusters/"


@pytest.fixture
def kubeconfig_cluster(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    text = kubeconfig_text(server=f"http://127.0.0.1:{closed_port()}", contexts=("lab", "prod"))
    response = api_client.post(
        URL, {"name": "lab", "kubeconfig": text, "allow_unreachable": True}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["context_name"] == "lab"
    return response.json()["id"]


def test_context_name_alone_switches_the_context(api_client, kubeconfig_cluster):
    response = api_client.patch(
        f"{URL}{kubeconfig_cluster}/", {"context_name": "prod", "allow_unreachable": True}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["context_name"] == "prod"
    cluster = Cluster.objects.get(pk=kubeconfig_cluster)
    assert cluster.context_name == "prod"
    assert AuditEvent.objects.filter(action="cluster.update").latest("id").detail == {
        "changed": ["credentials"]
    }


def test_a_context_the_kubeconfig_lacks_is_refused_naming_the_contexts(api_client, kubeconfig_cluster):
    response = api_client.patch(
        f"{URL}{kubeconfig_cluster}/", {"context_name": "staging", "allow_unreachable": True}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["context_name"] == [
        "context 'staging' is not in the kubeconfig; it has: lab, prod"
    ]
    assert Cluster.objects.get(pk=kubeconfig_cluster).context_name == "lab"


def test_an_unreachable_context_is_refused_unless_allowed(api_client, kubeconfig_cluster):
    response = api_client.patch(f"{URL}{kubeconfig_cluster}/", {"context_name": "prod"}, format="json")
    assert response.status_code == 400
    assert "context_name" in response.json()["error"]["fields"]
    assert Cluster.objects.get(pk=kubeconfig_cluster).context_name == "lab"


def test_a_token_cluster_has_no_context_to_switch_to(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    server = f"http://127.0.0.1:{closed_port()}"
    created = api_client.post(
        URL,
        {"name": "tok", "server": server, "token": "good-token", "allow_unreachable": True},
        format="json",
    )
    response = api_client.patch(f"{URL}{created.json()['id']}/", {"context_name": "prod"}, format="json")
    assert response.status_code == 400
    message = response.json()["error"]["fields"]["context_name"][0]
    assert "applies only to clusters registered with a kubeconfig" in message
