"""Integers outside the spec (revision, replicas, timeouts, page ids) are the digits 0-9 only: "١" is
refused with a field error instead of being quietly read as 1, "²" is a field error, not a 500."""

from __future__ import annotations

import pytest

from deployments.models import Deployment
from tests.faults.fuzz_support import build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(admin_user):
    world = build_world(admin_user)
    Deployment.objects.all().delete()  # no job in progress, so a valid number would start one
    return world


@pytest.mark.parametrize("digit", ["١", "²", "１"])
@pytest.mark.parametrize(
    ("suffix", "body", "field"),
    [
        ("deploy/", {"revision": "{d}"}, "revision"),
        ("rollback/", {"revision": "{d}"}, "revision"),
        ("scale/", {"role": "decode", "replicas": "{d}"}, "replicas"),
        ("preflight/", {"revision": "{d}"}, "revision"),
    ],
)
def test_api_integers_refuse_other_digits(api_client, admin_user, world, digit, suffix, body, field):
    api_client.force_authenticate(admin_user)
    payload = {k: v.format(d=digit) for k, v in body.items()}
    response = api_client.post(
        f"/api/v1/topologies/{world.ids['topologies']}/{suffix}", payload, format="json"
    )
    assert response.status_code == 400, response.content[:300]
    assert field in response.json()["error"]["fields"]
    assert not Deployment.objects.exists()


def test_the_deploy_policy_refuses_them_on_the_api_and_the_page(api_client, client, admin_user, world):
    topology = world.ids["topologies"]
    api_client.force_authenticate(admin_user)
    response = api_client.put(
        f"/api/v1/topologies/{topology}/deploy-policy/", {"ready_timeout_seconds": "١٢٠"}, format="json"
    )
    assert response.status_code == 400
    assert "digits 0-9" in response.json()["error"]["fields"]["ready_timeout_seconds"][0]
    client.force_login(admin_user)
    page = client.post(
        f"/deployments/topology/{topology}/deploy-policy/", {"ready_timeout_seconds": "١٢٠"}, follow=True
    )
    assert page.status_code == 200
    assert "Deploy policy not saved: ready timeout: enter a whole number of seconds" in page.content.decode()


def test_a_page_scale_with_other_digits_starts_nothing(client, admin_user, world):
    client.force_login(admin_user)
    response = client.post(
        f"/deployments/topology/{world.ids['topologies']}/scale/", {"role": "decode", "replicas": "١"}
    )
    assert response.status_code < 500
    assert not Deployment.objects.exists()
