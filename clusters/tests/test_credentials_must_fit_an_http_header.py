"""A bearer token that cannot go into an HTTP header ("токен") is a field error at registration and
update, never a UnicodeEncodeError 500 from the Kubernetes client."""

from __future__ import annotations

import pytest

from clusters.models import Cluster
from clusters.tests.helpers import closed_port, kubeconfig_text

pytestmark = pytest.mark.django_db
URL = "/api/v1/clusters/"


@pytest.mark.parametrize("token", ["токен", "abc\u202edef", "naïve-token", "tok\x7fen"])
def test_registration_with_a_non_ascii_token_names_the_token_field(api_client, admin_user, token):
    api_client.force_authenticate(admin_user)
    server = f"http://127.0.0.1:{closed_port()}"
    response = api_client.post(
        URL, {"name": "lab", "server": server, "token": token, "allow_unreachable": True}, format="json"
    )
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert "token" in error["fields"]
    assert "only visible ASCII" in error["fields"]["token"][0]
    assert not Cluster.objects.exists()


def test_update_with_a_non_ascii_token_names_the_token_field(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    server = f"http://127.0.0.1:{closed_port()}"
    created = api_client.post(
        URL,
        {"name": "lab", "server": server, "token": "good-token", "allow_unreachable": True},
        format="json",
    )
    assert created.status_code == 201, created.json()
    response = api_client.patch(
        f"{URL}{created.json()['id']}/",
        {"server": server, "token": "токен", "allow_unreachable": True},
        format="json",
    )
    assert response.status_code == 400
    assert "only visible ASCII" in response.json()["error"]["fields"]["token"][0]
    assert Cluster.objects.get().token == "good-token"


def test_a_kubeconfig_whose_token_is_not_ascii_names_the_kubeconfig(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    text = kubeconfig_text(server=f"http://127.0.0.1:{closed_port()}", user={"token": "токен"})
    response = api_client.post(
        URL, {"name": "lab", "kubeconfig": text, "allow_unreachable": True}, format="json"
    )
    assert response.status_code == 400
    assert "the user's token contains characters" in response.json()["error"]["fields"]["kubeconfig"][0]


def test_a_server_url_with_non_ascii_characters_is_a_field_error(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    response = api_client.post(
        URL,
        {"name": "lab", "server": "http://127.0.0.1:١٢٣", "token": "t", "allow_unreachable": True},
        format="json",
    )
    assert response.status_code == 400
    assert "characters a URL cannot carry" in response.json()["error"]["fields"]["server"][0]
