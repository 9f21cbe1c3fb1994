"""A failed registration on the page never sends the kubeconfig or the token back into the HTML,
and the page is never cached (Cache-Control: no-store)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from clusters.models import Cluster
from clusters.tests.helpers import closed_port, kubeconfig_text

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-token-never-shown-again"


def _no_store(response) -> bool:
    return "no-store" in response.get("Cache-Control", "")


@pytest.mark.parametrize("how", ["pasted", "uploaded"])
def test_a_failed_kubeconfig_registration_does_not_echo_the_kubeconfig(client, admin_user, how):
    client.force_login(admin_user)
    text = kubeconfig_text(
        server=f"http://127.0.0.1:{closed_port()}", user={"token": SECRET}, contexts=("lab", "prod")
    )
    data = {"name": "x", "method": "kubeconfig", "context": "staging"}
    if how == "pasted":
        data["kubeconfig"] = text
    else:
        data["kubeconfig_file"] = SimpleUploadedFile("config", text.encode())
    response = client.post("/clusters/register/", data)
    page = response.content.decode()
    assert response.status_code == 200
    assert "is not in the kubeconfig; it has: lab, prod" in page  # the refusal is still explained
    assert SECRET not in page
    assert "current-context" not in page  # no part of the file comes back
    assert "are not shown again" in page
    assert _no_store(response)
    assert not Cluster.objects.exists()


def test_a_failed_token_registration_does_not_echo_the_token(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        "/clusters/register/",
        {"name": "x", "method": "token", "server": f"http://127.0.0.1:{closed_port()}", "token": SECRET},
    )
    page = response.content.decode()
    assert "connection refused" in page
    assert SECRET not in page
    assert _no_store(response)


def test_the_empty_register_page_is_not_cached_either(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/clusters/register/")
    assert response.status_code == 200
    assert _no_store(response)
