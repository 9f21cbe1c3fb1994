"""GET /api/v1/topologies/{id}/calibration/: field errors for bad windows, a verdict on an empty window."""

from __future__ import annotations

import pytest


@pytest.fixture
def topology(db, admin_user):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    return topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)


@pytest.mark.parametrize("window", ["soon", "5s", "2h"])
def test_a_bad_window_is_a_field_error_naming_the_fix(api_client, viewer, topology, window):
    api_client.force_authenticate(viewer)
    response = api_client.get(f"/api/v1/topologies/{topology.pk}/calibration/?window={window}")
    assert response.status_code == 400
    assert "window" in response.json()["error"]["fields"]


def test_a_window_without_telemetry_is_not_enough_data_and_gives_no_parameters(api_client, viewer, topology):
    api_client.force_authenticate(viewer)
    body = api_client.get(f"/api/v1/topologies/{topology.pk}/calibration/?window=10m").json()
    assert body["verdict"] == "not enough data" and body["window_s"] == 600
    assert body["perf"] == {} and any("concurrency load" in r for r in body["reasons"])
    assert body["parameters"]["kv_latency_ms"]["basis"].startswith("nominal")
