"""Pages: list with shared filters, detail with revisions/diff/panels, editor that validates like the API."""

from __future__ import annotations

from datetime import UTC

import pytest

from topologies import panels
from topologies.forms import spec_to_values
from topologies.models import Topology
from topologies.presets import preset_spec
from topologies.services import topology_create, topology_update

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_topologies(cluster, operator):  # type: ignore[no-untyped-def]
    a = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=operator)
    b = topology_create(cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    return a, b


def _form(spec: dict, cluster_id: int, **extra: str) -> dict[str, str]:  # type: ignore[type-arg]
    return {**spec_to_values(spec), "cluster": str(cluster_id), **extra}


def test_list_shows_topologies_and_filters(client, viewer, two_topologies) -> None:
    client.force_login(viewer)
    page = client.get("/topologies/").content.decode()
    assert "qwen3-nixl" in page and "qwen3-sglang" in page
    assert "New topology" not in page  # viewers cannot create
    page = client.get("/topologies/?engine=sglang").content.decode()
    assert "qwen3-sglang" in page and "qwen3-nixl" not in page


def test_detail_shows_summary_revisions_and_coloured_diff(client, viewer, operator, two_topologies) -> None:
    topology = two_topologies[0]
    spec = preset_spec("qwen-gpu-nixl")
    spec["roles"]["decode"]["replicas"] = 2
    topology_update(topology=topology, spec=spec, actor=operator, message="second decode")
    client.force_login(viewer)
    page = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert "second decode" in page and "r2" in page and "NIXL" in page
    assert '<span class="diff-add">+      replicas: 2</span>' in page
    assert "Edit</a>" not in page
    missing = client.get(f"/topologies/{topology.pk}/?from=1&to=7").content.decode()
    assert "revision 7 does not exist" in missing


def test_registered_panels_render_in_order(client, viewer, two_topologies) -> None:
    saved = dict(panels._PANELS)
    try:
        panels._PANELS.clear()
        panels.register_panel(
            "first", "topologies/_preflight.html", lambda t: {"findings": [], "cluster": t.cluster}
        )
        panels.register_panel("broken", "topologies/_preflight.html", lambda t, r: 1 / 0)
        client.force_login(viewer)
        page = client.get(f"/topologies/{two_topologies[0].pk}/").content.decode()
        assert page.index('data-panel="first"') < page.index('data-panel="broken"')
        assert "Nothing blocks a deploy" in page
        assert "The broken panel could not be shown" in page
    finally:
        panels._PANELS.clear()
        panels._PANELS.update(saved)


def test_editor_needs_operator(client, viewer) -> None:
    client.force_login(viewer)
    assert client.get("/topologies/new/").status_code == 403


def test_editor_offers_presets_and_explains_fields(client, operator, cluster) -> None:
    client.force_login(operator)
    page = client.get("/topologies/new/?preset=deepseek-ascend-mooncake").content.decode()
    assert "Qwen3-0.6B on NVIDIA GPUs · SGLang + Mooncake" in page
    assert 'value="huawei.com/ascend-1980"' in page
    assert "The extended resource your nodes advertise" in page
    assert 'hx-trigger="input changed delay:500ms' in page


def test_editor_creates_topology(client, operator, cluster) -> None:
    client.force_login(operator)
    response = client.post("/topologies/new/", _form(preset_spec("qwen-sglang-mooncake"), cluster.pk))
    topology = Topology.objects.get(name="qwen3-sglang")
    assert response.status_code == 302 and response["Location"] == f"/topologies/{topology.pk}/"
    assert topology.spec["roles"]["prefill"]["replicas"] == 1
    assert topology.spec == topology.current_revision.spec  # type: ignore[union-attr]


def test_editor_shows_same_error_as_api_on_the_field(client, operator, cluster) -> None:
    client.force_login(operator)
    spec = preset_spec("deepseek-ascend-mooncake")
    spec["roles"]["prefill"]["tensor_parallel_size"] = 8
    spec["roles"]["prefill"]["data_parallel_size"] = 1
    response = client.post("/topologies/new/", _form(spec, cluster.pk))
    assert response.status_code == 400
    page = response.content.decode()
    assert (
        'data-field="roles.prefill.accelerator_count">must be ≥ tensor_parallel_size (8); set it to 8 '
        "or lower --tensor-parallel-size"
    ) in page
    assert not Topology.objects.exists()


def test_editor_update_saves_revision_and_noop_says_so(client, operator, two_topologies) -> None:
    topology = two_topologies[0]
    client.force_login(operator)
    spec = preset_spec("qwen-gpu-nixl")
    client.post(f"/topologies/{topology.pk}/edit/", _form(spec, topology.cluster_id), follow=True)
    assert topology.revisions.count() == 1
    spec["roles"]["prefill"]["replicas"] = 2
    page = client.post(
        f"/topologies/{topology.pk}/edit/", _form(spec, topology.cluster_id, message="p2"), follow=True
    ).content.decode()
    assert "Saved revision 2" in page
    assert topology.revisions.count() == 2
    saved = topology.revisions.order_by("number").last().created.astimezone(UTC)
    # The revisions list says when in the browser's zone (UTC, said so, without script).
    assert f'<time data-local="minutes" datetime="{saved.isoformat()}"' in page and "js/local-time.js" in page


def test_live_preflight_partial_reports_form_errors(client, operator, cluster) -> None:
    client.force_login(operator)
    values = _form(preset_spec("qwen-gpu-nixl"), cluster.pk)
    values["roles.decode.replicas"] = "many"
    page = client.post("/topologies/preflight/", values).content.decode()
    assert "roles.decode.replicas" in page and "whole number" in page


def test_live_preflight_reports_unreachable_cluster(client, operator, cluster) -> None:
    client.force_login(operator)
    page = client.post(
        "/topologies/preflight/", _form(preset_spec("qwen-gpu-nixl"), cluster.pk)
    ).content.decode()
    assert "cluster_unreachable" in page and "check the cluster" in page
