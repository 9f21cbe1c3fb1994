"""Kthena custom resources: served from the CRDs the project carries, validated, defaulted, scaled."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import requests
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

DATA = Path(__file__).parent / "data"
GROUP, VERSION, PLURAL = "workload.serving.volcano.sh", "v1alpha1", "modelservings"


def _example():
    return yaml.safe_load((DATA / "model-serving__prefill-decode-disaggregation.yaml").read_text())


def _serving(namespace, name="ms"):
    body = _example()
    body["metadata"] = {"name": name, "namespace": namespace}
    body["spec"]["replicas"] = 0
    return body


def test_installed_crds_are_listed(sandbox_cluster):
    ext = client.ApiextensionsV1Api(sandbox_cluster.api_client())
    names = {crd.metadata.name for crd in ext.list_custom_resource_definition().items}
    assert {
        "modelservings.workload.serving.volcano.sh",
        "modelservers.networking.serving.volcano.sh",
        "modelroutes.networking.serving.volcano.sh",
        "autoscalingpolicies.workload.serving.volcano.sh",
    } <= names
    crd = ext.read_custom_resource_definition("modelservings.workload.serving.volcano.sh")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"


def test_invalid_custom_object_is_422_with_the_field_path(custom, namespace):
    body = _serving(namespace)
    body["spec"]["template"]["roles"][0]["replicas"] = "two"
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert exc.value.status == 422
    status = json.loads(exc.value.body)
    assert status["reason"] == "Invalid"
    assert status["details"]["kind"] == "ModelServing"
    assert status["details"]["group"] == GROUP
    cause = status["details"]["causes"][0]
    assert cause["field"] == "spec.template.roles[0].replicas"
    assert cause["reason"] == "FieldValueTypeInvalid"
    assert status["message"].startswith(
        'ModelServing.workload.serving.volcano.sh "ms" is invalid: '
        'spec.template.roles[0].replicas: Invalid value: "two"'
    )


def test_missing_required_field_is_reported_as_required_value(custom, namespace):
    body = _serving(namespace)
    del body["spec"]["template"]["roles"][1]["entryTemplate"]
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    cause = json.loads(exc.value.body)["details"]["causes"][0]
    assert cause == {
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": "spec.template.roles[1].entryTemplate",
    }


def test_enum_violation_names_the_supported_values(custom, namespace):
    body = _serving(namespace)
    body["spec"]["recoveryPolicy"] = "Sometimes"
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    cause = json.loads(exc.value.body)["details"]["causes"][0]
    assert cause["field"] == "spec.recoveryPolicy"
    assert cause["message"].startswith('Unsupported value: "Sometimes": supported values:')


def test_unknown_fields_are_pruned_and_schema_defaults_applied(custom, namespace):
    body = _serving(namespace)
    body["spec"]["notAField"] = True
    del body["spec"]["template"]["roles"][0]["replicas"]
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert "notAField" not in created["spec"]
    assert created["spec"]["template"]["roles"][0]["replicas"] == 1
    assert created["metadata"]["generation"] == 1


def test_strict_field_validation_refuses_unknown_fields(sandbox_cluster, namespace):
    body = _serving(namespace)
    body["spec"]["notAField"] = True
    response = requests.post(
        f"{sandbox_cluster.server}/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}",
        params={"fieldValidation": "Strict"},
        json=body,
        headers={"Authorization": f"Bearer {sandbox_cluster.token}"},
        timeout=10,
    )
    assert response.status_code == 400
    assert 'unknown field "spec.notAField"' in response.json()["message"]


def test_status_is_only_written_through_the_status_subresource(custom, namespace):
    body = _serving(namespace, "st")
    body["status"] = {"replicas": 99}
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert (created.get("status") or {}).get("replicas") != 99
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "st", {"status": {"replicas": 42}}
    )
    assert (patched.get("status") or {}).get("replicas") != 42


def test_scale_subresource_reads_and_changes_spec_replicas(custom, namespace):
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _serving(namespace, "sc"))
    scale = custom.get_namespaced_custom_object_scale(GROUP, VERSION, namespace, PLURAL, "sc")
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 0
    custom.patch_namespaced_custom_object_scale(
        GROUP, VERSION, namespace, PLURAL, "sc", {"spec": {"replicas": 0}}
    )
    updated = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "sc")
    assert updated["spec"]["replicas"] == 0
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, namespace, PLURAL, "sc", {"spec": {"replicas": -1}}
        )
    assert exc.value.status == 422


def test_strategic_merge_patch_on_a_custom_resource_is_415(sandbox_cluster, custom, namespace):
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _serving(namespace, "smp"))
    response = requests.patch(
        f"{sandbox_cluster.server}/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/smp",
        data=json.dumps({"spec": {"replicas": 0}}),
        headers={
            "Authorization": f"Bearer {sandbox_cluster.token}",
            "Content-Type": "application/strategic-merge-patch+json",
        },
        timeout=10,
    )
    assert response.status_code == 415


def test_without_kthena_the_group_is_absent(sandbox_cluster_no_kthena):
    cluster = sandbox_cluster_no_kthena
    headers = {"Authorization": f"Bearer {cluster.token}"}
    groups = requests.get(f"{cluster.server}/apis", headers=headers, timeout=5).json()
    names = {g["name"] for g in groups["groups"]}
    assert "workload.serving.volcano.sh" not in names
    assert "networking.serving.volcano.sh" not in names
    missing = requests.get(
        f"{cluster.server}/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}", headers=headers, timeout=5
    )
    assert missing.status_code == 404
    ext = client.ApiextensionsV1Api(cluster.api_client())
    assert ext.list_custom_resource_definition().items == []
    custom = client.CustomObjectsApi(cluster.api_client())
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, copy.deepcopy(_serving("default"))
        )
    assert exc.value.status == 404
