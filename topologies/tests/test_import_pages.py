"""Import page: paste or upload, a preview of mapped / verbatim / unsupported parts, then create."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from topologies.models import Topology
from topologies.presets import preset_spec
from topologies.services import topology_create

pytestmark = pytest.mark.django_db
DATA = Path(__file__).parent / "data"


def _example() -> str:
    return (DATA / "import-kthena-pd.yaml").read_text()


def test_preview_lists_the_three_kinds_and_saves_nothing(client, operator, cluster) -> None:
    client.force_login(operator)
    response = client.post(
        "/topologies/import/", {"yaml": _example(), "cluster": cluster.pk, "action": "preview"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-kind="mapped"' in page and 'data-kind="unsupported"' in page
    assert "init container downloader" in page  # carried in the overlay, and named
    assert "--max-model-len 8192" in page  # kept verbatim
    assert "Create topology" in page
    assert not Topology.objects.exists()


def test_create_from_an_uploaded_file_lands_on_the_new_topology(client, operator, cluster) -> None:
    client.force_login(operator)
    upload = SimpleUploadedFile("pd.yaml", _example().encode(), content_type="application/yaml")
    response = client.post("/topologies/import/", {"file": upload, "cluster": cluster.pk, "action": "create"})
    assert response.status_code == 302
    topology = Topology.objects.get()
    assert response["Location"] == f"/topologies/{topology.pk}/"
    assert (topology.name, topology.kv_connector, topology.backend) == ("qwen-pd", "nixl", "kthena")


def test_missing_fields_are_named_and_overrides_fill_them(client, operator, cluster) -> None:
    client.force_login(operator)
    text = _example().split("---")[0]  # the ModelServing alone: engine args name no model
    text = text.replace("--served-model-name", "--seed").replace("--kv-transfer-config", "--x")
    page = client.post("/topologies/import/", {"yaml": text, "cluster": cluster.pk, "action": "create"})
    assert page.status_code == 400
    assert "spec.connector.type" in page.content.decode() and not Topology.objects.exists()
    ok = client.post(
        "/topologies/import/",
        {"yaml": text, "cluster": cluster.pk, "action": "create", "overrides": "connector: {type: nixl}"},
    )
    assert ok.status_code == 302, ok.content.decode()[:2000]
    bad = client.post("/topologies/import/", {"yaml": text, "overrides": "[1, 2"})
    assert "overrides is not valid YAML" in bad.content.decode()


@pytest.mark.parametrize("body", [{}, {"yaml": "  "}, {"yaml": "a: [b"}, {"yaml": "- 1\n- 2"}])
def test_bad_input_is_answered_in_words(client, operator, body) -> None:
    client.force_login(operator)
    response = client.post("/topologies/import/", body)
    assert response.status_code in (200, 400)
    page = response.content.decode()
    assert "alert-error" in page


def test_viewers_cannot_import(client, viewer) -> None:
    client.force_login(viewer)
    assert client.get("/topologies/import/").status_code == 403


def test_detail_offers_copy_and_download_of_each_revision(client, viewer, operator, cluster) -> None:
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=operator)
    client.force_login(viewer)
    page = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert f"/api/v1/topologies/{topology.pk}/revisions/1/manifests.yaml?download=1" in page
    assert f"/api/v1/topologies/{topology.pk}/revisions/1/spec.yaml?download=1" in page
    assert 'data-copy="manifests-yaml"' in page
    download = client.get(f"/api/v1/topologies/{topology.pk}/revisions/1/manifests.yaml?download=1")
    assert download.status_code == 200 and b"kind: ModelServing" in download.content


def test_editor_offers_the_accelerators_the_nodes_advertise(client, operator, cluster) -> None:
    from django.utils import timezone

    from clusters.models import NodeInventory

    for i, in_use in enumerate((1, 3)):
        NodeInventory.objects.create(
            cluster=cluster,
            name=f"n{i}",
            ready=True,
            schedulable=True,
            seen=timezone.now(),
            accelerators={"nvidia.com/gpu": {"capacity": 4, "allocatable": 4, "in_use": in_use}},
        )
    client.force_login(operator)
    page = client.get(f"/topologies/new/?cluster={cluster.pk}").content.decode()
    assert f'list="accelerators-{cluster.pk}"' in page
    option = '<option value="nvidia.com/gpu" label="4 free of 8 on 2 nodes">'
    assert f'<datalist id="accelerators-{cluster.pk}">{option}' in page
    assert "<code>nvidia.com/gpu</code> 4 free / 8 total" in page
