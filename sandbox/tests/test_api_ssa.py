"""Server-side apply: create-or-update, managed fields, conflicts with other managers, force."""

from __future__ import annotations

import json

import requests
import yaml
from kubernetes import client


def _apply(cluster, path, body, manager, force=False):
    query = {"fieldManager": manager}
    if force:
        query["force"] = "true"
    return requests.patch(
        f"{cluster.server}{path}",
        params=query,
        data=yaml.safe_dump(body),
        headers={"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/apply-patch+yaml"},
        timeout=10,
    )


def _config(name, data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_apply_creates_then_updates_and_records_the_manager(sandbox_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps/cfg"
    created = _apply(sandbox_cluster, path, _config("cfg", {"a": "1"}), "tandem")
    assert created.status_code == 201
    updated = _apply(sandbox_cluster, path, _config("cfg", {"a": "2", "b": "3"}), "tandem")
    assert updated.status_code == 200
    body = updated.json()
    assert body["data"] == {"a": "2", "b": "3"}
    entries = body["metadata"]["managedFields"]
    assert [(e["manager"], e["operation"]) for e in entries] == [("tandem", "Apply")]
    assert entries[0]["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}


def test_apply_removes_fields_the_manager_stopped_applying(sandbox_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps/shrink"
    _apply(sandbox_cluster, path, _config("shrink", {"a": "1", "b": "2"}), "tandem")
    body = _apply(sandbox_cluster, path, _config("shrink", {"a": "1"}), "tandem").json()
    assert body["data"] == {"a": "1"}


def test_apply_conflicts_with_another_managers_field_unless_forced(sandbox_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps/shared"
    _apply(sandbox_cluster, path, _config("shared", {"a": "1"}), "tandem")
    conflict = _apply(sandbox_cluster, path, _config("shared", {"a": "other"}), "someone-else")
    assert conflict.status_code == 409
    status = conflict.json()
    assert status["reason"] == "Conflict"
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "tandem" using v1: .data.a'
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "tandem" using v1', "field": ".data.a"}
    ]
    forced = _apply(sandbox_cluster, path, _config("shared", {"a": "other"}), "someone-else", force=True)
    assert forced.status_code == 200
    managers = {e["manager"]: e for e in forced.json()["metadata"]["managedFields"]}
    assert "f:a" in managers["someone-else"]["fieldsV1"]["f:data"]
    assert "tandem" not in managers


def test_same_value_from_two_managers_is_shared_not_a_conflict(sandbox_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps/agree"
    _apply(sandbox_cluster, path, _config("agree", {"a": "1"}), "tandem")
    agreed = _apply(sandbox_cluster, path, _config("agree", {"a": "1"}), "ops")
    assert agreed.status_code == 200


def test_apply_conflicts_with_an_update_made_by_a_plain_patch(sandbox_cluster, namespace):
    apps = client.AppsV1Api(sandbox_cluster.api_client())
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
            },
        },
    }
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/web"
    assert _apply(sandbox_cluster, path, deployment, "tandem").status_code == 201
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 0}})
    apps.patch_namespaced_deployment(
        "web", namespace, {"spec": {"minReadySeconds": 5}}, field_manager="kubectl-edit"
    )
    again = {**deployment, "spec": {**deployment["spec"], "minReadySeconds": 1}}
    conflict = _apply(sandbox_cluster, path, again, "tandem")
    assert conflict.status_code == 409
    assert '"kubectl-edit"' in conflict.json()["message"]
    assert ".spec.minReadySeconds" in json.dumps(conflict.json()["details"])


def test_apply_with_stale_resource_version_is_409(sandbox_cluster, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps/rv"
    first = _apply(sandbox_cluster, path, _config("rv", {"a": "1"}), "tandem").json()
    _apply(sandbox_cluster, path, _config("rv", {"a": "2"}), "tandem")
    stale = _config("rv", {"a": "3"})
    stale["metadata"]["resourceVersion"] = first["metadata"]["resourceVersion"]
    assert _apply(sandbox_cluster, path, stale, "tandem").status_code == 409


def test_apply_without_field_manager_is_refused(sandbox_cluster, namespace):
    response = requests.patch(
        f"{sandbox_cluster.server}/api/v1/namespaces/{namespace}/configmaps/x",
        data=yaml.safe_dump(_config("x", {})),
        headers={
            "Authorization": f"Bearer {sandbox_cluster.token}",
            "Content-Type": "application/apply-patch+yaml",
        },
        timeout=10,
    )
    assert response.status_code == 400
    assert "fieldManager" in response.json()["message"]
