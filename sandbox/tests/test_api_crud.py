"""CRUD semantics through the official `kubernetes` client: codes, metadata, Status bodies, conflicts."""

from __future__ import annotations

import json
import uuid

import pytest
import requests
from kubernetes import client
from kubernetes.client.rest import ApiException


def _config_map(name, labels=None, data=None):
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data or {"k": "v"}}


def test_create_returns_201_with_server_metadata(core, namespace):
    created, status, _ = core.create_namespaced_config_map_with_http_info(namespace, _config_map("one"))
    assert status == 201
    meta = created.metadata
    assert meta.uid and meta.resource_version and meta.creation_timestamp
    assert meta.namespace == namespace
    assert created.data == {"k": "v"}


def test_resource_version_is_one_global_counter(core, namespace):
    first = core.create_namespaced_config_map(namespace, _config_map("a"))
    second = core.create_namespaced_secret(namespace, {"metadata": {"name": "b"}, "stringData": {"x": "y"}})
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)


def test_get_of_missing_object_is_a_404_status_body(sandbox_cluster, namespace):
    response = requests.get(
        f"{sandbox_cluster.server}/api/v1/namespaces/{namespace}/pods/ghost",
        headers={"Authorization": f"Bearer {sandbox_cluster.token}"},
        timeout=5,
    )
    assert response.status_code == 404
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "ghost" not found',
        "reason": "NotFound",
        "details": {"name": "ghost", "kind": "pods"},
        "code": 404,
    }


def test_create_twice_is_409_already_exists(core, namespace):
    core.create_namespaced_config_map(namespace, _config_map("dup"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(namespace, _config_map("dup"))
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "dup" already exists'


def test_create_in_missing_namespace_is_404_naming_the_namespace(core):
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("no-such-ns", _config_map("x"))
    assert exc.value.status == 404
    assert json.loads(exc.value.body)["message"] == 'namespaces "no-such-ns" not found'


def test_replace_with_stale_resource_version_is_409_conflict(core, namespace):
    created = core.create_namespaced_config_map(namespace, _config_map("cas"))
    stale = created.metadata.resource_version
    created.data = {"k": "v2"}
    updated = core.replace_namespaced_config_map("cas", namespace, created)
    assert updated.data == {"k": "v2"}
    assert int(updated.metadata.resource_version) > int(stale)
    created.metadata.resource_version = stale
    created.data = {"k": "v3"}
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("cas", namespace, created)
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]


def test_generation_bumps_on_spec_change_only(apps, namespace):
    deployment = {
        "metadata": {"name": "gen", "labels": {"app": "gen"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "gen"}},
            "template": {
                "metadata": {"labels": {"app": "gen"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
            },
        },
    }
    created = apps.create_namespaced_deployment(namespace, deployment)
    assert created.metadata.generation == 1
    labelled = apps.patch_namespaced_deployment("gen", namespace, {"metadata": {"labels": {"extra": "yes"}}})
    assert labelled.metadata.generation == 1
    scaled = apps.patch_namespaced_deployment(
        "gen", namespace, {"spec": {"replicas": 0, "minReadySeconds": 3}}
    )
    assert scaled.metadata.generation == 2


def test_merge_patch_json_patch_and_strategic_merge(core, namespace):
    core.create_namespaced_config_map(namespace, _config_map("p", data={"a": "1", "b": "2"}))
    merged = core.patch_namespaced_config_map("p", namespace, {"data": {"a": None, "c": "3"}})
    assert merged.data == {"b": "2", "c": "3"}
    # A list body makes the client send application/json-patch+json.
    patched = core.patch_namespaced_config_map(
        "p", namespace, [{"op": "replace", "path": "/data/b", "value": "20"}]
    )
    assert patched.data == {"b": "20", "c": "3"}


def test_strategic_merge_patch_merges_containers_by_name(apps, namespace):
    deployment = {
        "metadata": {"name": "smp"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "smp"}},
            "template": {
                "metadata": {"labels": {"app": "smp"}},
                "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
            },
        },
    }
    apps.create_namespaced_deployment(namespace, deployment)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}}
    patched = apps.patch_namespaced_deployment("smp", namespace, patch)
    images = {c.name: c.image for c in patched.spec.template.spec.containers}
    assert images == {"a": "a:1", "b": "b:2"}


def test_delete_answers_a_success_status(core, namespace):
    core.create_namespaced_config_map(namespace, _config_map("gone"))
    status = core.delete_namespaced_config_map("gone", namespace)
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert status["details"]["name"] == "gone"
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("gone", namespace)
    assert exc.value.status == 404


def test_lists_carry_kind_api_version_and_resource_version(sandbox_cluster, namespace, core):
    core.create_namespaced_config_map(namespace, _config_map("listed"))
    response = requests.get(
        f"{sandbox_cluster.server}/api/v1/namespaces/{namespace}/configmaps",
        headers={"Authorization": f"Bearer {sandbox_cluster.token}"},
        timeout=5,
    ).json()
    assert response["kind"] == "ConfigMapList"
    assert response["apiVersion"] == "v1"
    assert int(response["metadata"]["resourceVersion"]) > 0
    assert [item["metadata"]["name"] for item in response["items"]] == ["listed"]


def test_request_without_token_is_401_status(sandbox_cluster):
    response = requests.get(f"{sandbox_cluster.server}/api/v1/namespaces", timeout=5)
    assert response.status_code == 401
    assert response.json()["reason"] == "Unauthorized"
    wrong = requests.get(
        f"{sandbox_cluster.server}/api/v1/namespaces", headers={"Authorization": "Bearer nope"}, timeout=5
    )
    assert wrong.status_code == 401


def test_invalid_builtin_object_is_422_naming_the_field(apps, namespace):
    deployment = {
        "metadata": {"name": "bad"},
        "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "y"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    with pytest.raises(ApiException) as exc:
        apps.create_namespaced_deployment(namespace, deployment)
    assert exc.value.status == 422
    body = json.loads(exc.value.body)
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.template.metadata.labels"


def test_self_subject_access_review_is_allowed(sandbox_cluster):
    authz = client.AuthorizationV1Api(sandbox_cluster.api_client())
    review = authz.create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "default"}}}
    )
    assert review.status.allowed is True


def test_namespace_deletion_removes_its_contents(core):
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_config_map(name, _config_map("inside"))
    core.delete_namespace(name)
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            assert exc.status == 404
            break
        time.sleep(0.1)
    else:
        pytest.fail("namespace still present after 10 s")
    assert core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={name}").items == []


def test_server_side_dry_run_validates_without_storing(core, namespace):
    preview = core.create_namespaced_config_map(namespace, _config_map("dry"), dry_run="All")
    assert preview.metadata.name == "dry"
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("dry", namespace)
    assert exc.value.status == 404


def test_pod_spec_is_immutable_except_images(core, namespace, sandbox_cluster):
    core.create_namespaced_pod(
        namespace,
        {"metadata": {"name": "fixed"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
    )
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod(
            "fixed", namespace, {"spec": {"containers": [{"name": "c", "command": ["sleep", "1"]}]}}
        )
    assert exc.value.status == 422
    assert "pod updates may not change fields other than" in json.loads(exc.value.body)["message"]
    patched = core.patch_namespaced_pod(
        "fixed", namespace, {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}
    )
    assert patched.spec.containers[0].image == "busybox:1.37"


def test_deployment_selector_is_immutable(apps, namespace):
    deployment = {
        "metadata": {"name": "sel"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "sel"}},
            "template": {
                "metadata": {"labels": {"app": "sel", "v": "1"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    apps.create_namespaced_deployment(namespace, deployment)
    with pytest.raises(ApiException) as exc:
        apps.patch_namespaced_deployment(
            "sel", namespace, {"spec": {"selector": {"matchLabels": {"app": "sel", "v": "1"}}}}
        )
    assert exc.value.status == 422
    assert json.loads(exc.value.body)["details"]["causes"][0]["field"] == "spec.selector"


def test_resource_quantities_are_stored_in_canonical_form(apps, namespace):
    container = {
        "name": "engine",
        "image": "engine:1",
        "resources": {"requests": {"cpu": "1.5", "memory": "0.5Gi"}, "limits": {"cpu": "1000m"}},
    }
    body = {
        "metadata": {"name": "quantities"},
        "spec": {
            "selector": {"matchLabels": {"app": "q"}},
            "template": {"metadata": {"labels": {"app": "q"}}, "spec": {"containers": [container]}},
        },
    }
    created = apps.create_namespaced_deployment(namespace, body)
    resources = created.spec.template.spec.containers[0].resources
    assert resources.requests == {"cpu": "1500m", "memory": "512Mi"}
    assert resources.limits == {"cpu": "1"}
