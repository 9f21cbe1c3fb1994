"""One rule for preflight on the page and the API: it calls the cluster's API with Tandem's
credentials, so it needs the operator role on both; viewers get 403 on both and see no button."""

from __future__ import annotations

import pytest

from topologies.presets import preset_spec
from topologies.services import topology_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def topology(cluster, operator):
    return topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=operator)


def _answers(api_client, client, user, topology, cluster) -> dict[str, int]:
    api_client.force_authenticate(user)
    client.force_login(user)
    spec = preset_spec("qwen-gpu-nixl")
    return {
        "api saved": api_client.post(
            f"/api/v1/topologies/{topology.pk}/preflight/", {}, format="json"
        ).status_code,
        "api spec": api_client.post(
            "/api/v1/topologies/preflight/", {"cluster": cluster.pk, "spec": spec}, format="json"
        ).status_code,
        "page saved": client.post(f"/topologies/{topology.pk}/preflight/").status_code,
        "page editor": client.post("/topologies/preflight/", {"cluster": str(cluster.pk)}).status_code,
    }


def test_viewers_may_not_run_preflight_on_the_api_or_the_page(api_client, client, viewer, topology, cluster):
    assert _answers(api_client, client, viewer, topology, cluster) == {
        "api saved": 403,
        "api spec": 403,
        "page saved": 403,
        "page editor": 403,
    }
    detail = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert "Run preflight" not in detail


def test_operators_may_on_both(api_client, client, operator, topology, cluster):
    assert _answers(api_client, client, operator, topology, cluster) == {
        "api saved": 200,
        "api spec": 200,
        "page saved": 200,
        "page editor": 200,
    }
    assert "Run preflight" in client.get(f"/topologies/{topology.pk}/").content.decode()


def test_the_api_refusal_names_the_role(api_client, viewer, topology):
    api_client.force_authenticate(viewer)
    error = api_client.post(f"/api/v1/topologies/{topology.pk}/preflight/", {}, format="json").json()["error"]
    assert error["message"] == "This action needs the operator role; you are a viewer."
