from __future__ import annotations

import pytest
from django.utils import timezone

from gateway.models import BreakerEvent, GatewayRequest


@pytest.fixture
def topology(db, admin_user):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    return topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)


def test_topology_page_shows_the_gateway_panel(client, operator, topology):
    client.force_login(operator)
    html = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert 'id="gateway"' in html and "Verify" in html and "none known" in html


def test_viewer_sees_the_panel_without_the_buttons(client, viewer, topology):
    client.force_login(viewer)
    html = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert 'id="gateway"' in html and 'data-role="verify"' not in html
    assert client.post(f"/gateway/topology/{topology.pk}/verify/").status_code == 403


def test_settings_form_saves_and_keeps_the_fallback_key_secret(client, operator, topology):
    client.force_login(operator)
    response = client.post(
        f"/gateway/topology/{topology.pk}/settings/",
        {
            "endpoint_url": "http://router.example:8080",
            "aliases": "qwen, small",
            "fallback_base_url": "https://api.example.com/v1",
            "fallback_api_key": "sk-very-secret-upstream-key",
        },
    )
    assert response.status_code == 302
    route = topology.gateway_route
    route.refresh_from_db()
    assert route.aliases == ["qwen", "small"] and route.fallback_api_key == "sk-very-secret-upstream-key"
    html = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert "sk-very-secret-upstream-key" not in html and "key set" in html
    api = client.get(f"/api/v1/topologies/{topology.pk}/gateway/").json()
    assert "fallback_api_key" not in api and api["fallback_key_set"] is True


def test_bad_settings_say_which_field(client, operator, topology):
    client.force_login(operator)
    client.post(
        f"/gateway/topology/{topology.pk}/settings/", {"fallback_base_url": "https://api.example.com"}
    )
    html = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert "ends in /v1" in html


def test_overview_lists_open_circuits_and_fallback_traffic(client, viewer, topology):
    BreakerEvent.objects.create(topology=topology, state="open", reason="cannot connect to 10.0.0.1:8080")
    GatewayRequest.objects.create(
        created=timezone.now(),
        model="m",
        topology=topology,
        endpoint="chat/completions",
        backend="fallback",
        status=200,
        latency_ms=12.0,
    )
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert "overview-gateway" in html and "cannot connect" in html
