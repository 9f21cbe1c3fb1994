"""REST: CRUD, validation errors that name the field, roles, revisions and diff."""

from __future__ import annotations

import pytest

from topologies.models import Revision, Topology
from topologies.presets import preset_spec

pytestmark = pytest.mark.django_db
URL = "/api/v1/topologies/"


def _create(api_client, cluster, **overrides):  # type: ignore[no-untyped-def]
    return api_client.post(
        URL, {"cluster": cluster.pk, "spec": preset_spec("qwen-gpu-nixl", **overrides)}, format="json"
    )


def test_operator_creates_topology_with_revision_one(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    response = _create(api_client, cluster)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (
        body["name"] == "qwen3-nixl" and body["current_revision"] == 1 and body["deployed_revision"] is None
    )
    assert body["kv_connector"] == "nixl" and body["cluster_name"] == "lab"
    assert body["spec"]["roles"]["prefill"]["tensor_parallel_size"] == 1
    assert Revision.objects.get(topology_id=body["id"]).number == 1


def test_viewer_reads_but_cannot_write(api_client, viewer, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    topology_id = _create(api_client, cluster).json()["id"]
    api_client.force_authenticate(viewer)
    assert api_client.get(URL).status_code == 200
    assert api_client.get(f"{URL}{topology_id}/").status_code == 200
    refused = _create(api_client, cluster, name="other")
    assert refused.status_code == 403
    assert "operator" in refused.json()["error"]["message"]
    assert (
        api_client.put(
            f"{URL}{topology_id}/", {"spec": preset_spec("qwen-gpu-nixl")}, format="json"
        ).status_code
        == 403
    )
    assert api_client.delete(f"{URL}{topology_id}/").status_code == 403


def test_invalid_spec_error_names_field_and_fix(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    spec = preset_spec("deepseek-ascend-mooncake")
    spec["roles"]["prefill"]["tensor_parallel_size"] = 8
    spec["roles"]["prefill"]["data_parallel_size"] = 1
    response = api_client.post(URL, {"cluster": cluster.pk, "spec": spec}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"]["spec.roles.prefill.accelerator_count"] == [
        "must be ≥ tensor_parallel_size (8); set it to 8 or lower --tensor-parallel-size"
    ]
    assert error["message"].startswith("spec.roles.prefill.accelerator_count:")


def test_unknown_cluster_is_named(api_client, operator) -> None:
    api_client.force_authenticate(operator)
    response = api_client.post(URL, {"cluster": 999, "spec": preset_spec("qwen-gpu-nixl")}, format="json")
    assert response.status_code == 400
    assert "cluster 999 does not exist" in response.json()["error"]["fields"]["cluster"][0]


def test_duplicate_name_on_same_cluster_conflicts(api_client, operator, cluster, other_cluster) -> None:
    api_client.force_authenticate(operator)
    assert _create(api_client, cluster).status_code == 201
    again = _create(api_client, cluster)
    assert again.status_code == 409
    assert "spec.name" in again.json()["error"]["fields"]
    assert _create(api_client, other_cluster).status_code == 201


def test_update_creates_revision_and_noop_does_not(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    topology_id = _create(api_client, cluster).json()["id"]
    spec = preset_spec("qwen-gpu-nixl")
    same = api_client.put(f"{URL}{topology_id}/", {"spec": spec}, format="json")
    assert same.status_code == 200 and same.json()["current_revision"] == 1
    spec["roles"]["decode"]["replicas"] = 2
    changed = api_client.put(f"{URL}{topology_id}/", {"spec": spec, "message": "more decode"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["current_revision"] == 2
    revisions = api_client.get(f"{URL}{topology_id}/revisions/").json()
    assert [r["number"] for r in revisions] == [2, 1]
    assert revisions[0]["message"] == "more decode" and revisions[0]["created_by"] == operator.username


def test_update_refuses_rename_naming_the_field(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    topology_id = _create(api_client, cluster).json()["id"]
    response = api_client.put(
        f"{URL}{topology_id}/", {"spec": preset_spec("qwen-gpu-nixl", name="renamed")}, format="json"
    )
    assert response.status_code == 400
    assert "create a new topology" in response.json()["error"]["fields"]["spec.name"][0]


def test_revision_detail_and_diff(api_client, operator, viewer, cluster) -> None:
    api_client.force_authenticate(operator)
    topology_id = _create(api_client, cluster).json()["id"]
    spec = preset_spec("qwen-gpu-nixl")
    spec["roles"]["decode"]["replicas"] = 3
    api_client.put(f"{URL}{topology_id}/", {"spec": spec}, format="json")
    api_client.force_authenticate(viewer)
    detail = api_client.get(f"{URL}{topology_id}/revisions/2/").json()
    assert [o["kind"] for o in detail["manifests"]] == ["ModelServing", "ModelServer", "ModelRoute"]
    diff = api_client.get(f"{URL}{topology_id}/revisions/diff/?from=1&to=2").json()
    assert diff["from_revision"] == 1 and diff["to_revision"] == 2
    assert "-      replicas: 1\n" in diff["diff"] and "+      replicas: 3\n" in diff["diff"]
    missing = api_client.get(f"{URL}{topology_id}/revisions/diff/?from=1")
    assert missing.status_code == 400 and "?from=1&to=2" in missing.json()["error"]["fields"]["to"][0]
    unknown = api_client.get(f"{URL}{topology_id}/revisions/diff/?from=1&to=9")
    assert unknown.status_code == 404 and "to" in unknown.json()["error"]["fields"]


def test_list_filters_shared_with_ui(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    _create(api_client, cluster)
    api_client.post(URL, {"cluster": cluster.pk, "spec": preset_spec("qwen-sglang-mooncake")}, format="json")
    names = [t["name"] for t in api_client.get(f"{URL}?engine=sglang").json()["results"]]
    assert names == ["qwen3-sglang"]
    names = [t["name"] for t in api_client.get(f"{URL}?q=nixl").json()["results"]]
    assert names == ["qwen3-nixl"]
    bad = api_client.get(f"{URL}?engine=tgi")
    assert bad.status_code == 400 and "engine" in bad.json()["error"]["fields"]
    assert "use one of: vllm" in bad.json()["error"]["fields"]["engine"][0]
    unknown = api_client.get(f"{URL}?cluster=999999").json()["error"]["fields"]["cluster"]
    assert unknown == ["no cluster has id 999999; use an id from /api/v1/clusters/"]


def test_delete_starts_a_delete_job(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    topology_id = _create(api_client, cluster).json()["id"]
    response = api_client.delete(f"{URL}{topology_id}/")
    assert response.status_code == 202, response.json()
    assert response.json()["url"] == f"/api/v1/deployments/{response.json()['deployment']}/"
    assert Topology.objects.filter(pk=topology_id).exists()  # removed by the job once its objects are gone


def test_missing_fields_say_what_to_send(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    fields = api_client.post(URL, {}, format="json").json()["error"]["fields"]
    assert "registered cluster" in fields["cluster"][0] and "whole topology spec" in fields["spec"][0]
    topology_id = _create(api_client, cluster).json()["id"]
    patched = api_client.patch(f"{URL}{topology_id}/", {"message": "x"}, format="json")
    assert (
        patched.status_code == 400 and "whole topology spec" in patched.json()["error"]["fields"]["spec"][0]
    )


def test_a_topology_and_revision_made_by_the_system_read_created_by_null(api_client, viewer, cluster) -> None:
    """Objects the system made (the demo, an adoption by a worker) have no creating user: the answer
    says null, and the schema allows it (every answer here is checked against the OpenAPI document)."""
    from topologies.services import topology_create

    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=None)
    api_client.force_authenticate(viewer)
    detail = api_client.get(f"{URL}{topology.pk}/")
    assert detail.status_code == 200 and detail.json()["created_by"] is None
    revisions = api_client.get(f"{URL}{topology.pk}/revisions/")
    assert revisions.status_code == 200
    assert [r["created_by"] for r in revisions.json()] == [None]


def test_adopt_documents_its_404_for_a_workload_that_is_gone() -> None:
    """topology_adopt answers 404 `not_found` when the workload named is not there; the document says so,
    in the shared error shape (schemathesis found the status undocumented)."""
    from tests import schema_contract

    responses = schema_contract.document()["paths"]["/api/v1/topologies/adopt/"]["post"]["responses"]
    assert "not there to adopt" in responses["404"]["description"]
    assert responses["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
