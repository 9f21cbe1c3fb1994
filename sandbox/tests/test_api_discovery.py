"""Discovery, OpenAPI for kubectl, bearer-token auth and the TLS endpoint."""

from __future__ import annotations

import pytest
import requests
from kubernetes import client


def _get(cluster, path, **kwargs):
    return requests.get(
        f"{cluster.server}{path}", headers={"Authorization": f"Bearer {cluster.token}"}, timeout=5, **kwargs
    )


def test_version_is_public_and_looks_like_kubernetes(sandbox_cluster):
    info = requests.get(f"{sandbox_cluster.server}/version", timeout=5).json()
    assert info["major"] == "1"
    assert info["gitVersion"].startswith("v1.")


def test_core_group_lists_resources_with_verbs_short_names_and_subresources(sandbox_cluster):
    assert _get(sandbox_cluster, "/api").json()["versions"] == ["v1"]
    doc = _get(sandbox_cluster, "/api/v1").json()
    assert doc["kind"] == "APIResourceList"
    resources = {r["name"]: r for r in doc["resources"]}
    assert resources["pods"]["shortNames"] == ["po"]
    assert resources["pods"]["namespaced"] is True
    assert set(resources["pods"]["verbs"]) >= {"create", "get", "list", "watch", "patch", "update", "delete"}
    assert resources["pods/log"]["verbs"] == ["get"]
    assert resources["pods/status"]["kind"] == "Pod"
    assert resources["nodes"]["namespaced"] is False
    assert {"namespaces", "services", "endpoints", "events", "configmaps", "secrets"} <= set(resources)


def test_group_discovery_includes_scale_subresources_and_kthena(sandbox_cluster):
    groups = {g["name"]: g for g in _get(sandbox_cluster, "/apis").json()["groups"]}
    assert {
        "apps",
        "apiextensions.k8s.io",
        "authorization.k8s.io",
        "workload.serving.volcano.sh",
        "networking.serving.volcano.sh",
    } <= set(groups)
    assert groups["apps"]["preferredVersion"]["groupVersion"] == "apps/v1"
    apps = {r["name"]: r for r in _get(sandbox_cluster, "/apis/apps/v1").json()["resources"]}
    assert apps["deployments/scale"]["group"] == "autoscaling"
    assert apps["deployments/scale"]["kind"] == "Scale"
    assert "deployments/status" in apps
    kthena = {
        r["name"]: r
        for r in _get(sandbox_cluster, "/apis/workload.serving.volcano.sh/v1alpha1").json()["resources"]
    }
    assert kthena["modelservings"]["kind"] == "ModelServing"
    assert "modelservings/scale" in kthena
    assert "modelservings/status" in kthena
    assert "autoscalingpolicies" in kthena
    networking = {
        r["name"]
        for r in _get(sandbox_cluster, "/apis/networking.serving.volcano.sh/v1alpha1").json()["resources"]
    }
    assert {"modelservers", "modelroutes"} <= networking


def test_openapi_v3_declares_server_side_field_validation(sandbox_cluster):
    root = _get(sandbox_cluster, "/openapi/v3").json()
    url = root["paths"]["apis/workload.serving.volcano.sh/v1alpha1"]["serverRelativeURL"]
    doc = _get(sandbox_cluster, url.split("?")[0]).json()
    patch = doc["paths"][
        "/apis/workload.serving.volcano.sh/v1alpha1/namespaces/{namespace}/modelservings/{name}"
    ]["patch"]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "ModelServing"
    assert "fieldValidation" in {p["name"] for p in patch["parameters"]}


def test_unknown_path_is_404_status(sandbox_cluster):
    response = _get(sandbox_cluster, "/apis/nope.example.com/v1/widgets")
    assert response.status_code == 404
    assert response.json()["kind"] == "Status"


def test_discovery_without_token_is_401(sandbox_cluster):
    response = requests.get(f"{sandbox_cluster.server}/apis", timeout=5)
    assert response.status_code == 401
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_tls_cluster_serves_https_with_the_generated_ca(sandbox_cluster_tls):
    cluster = sandbox_cluster_tls
    assert cluster.server.startswith("https://127.0.0.1:")
    assert cluster.ca_path is not None and cluster.ca_path.read_text().startswith(
        "-----BEGIN CERTIFICATE-----"
    )
    nodes = client.CoreV1Api(cluster.api_client()).list_node()
    assert len(nodes.items) == 4
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{cluster.server}/version", timeout=5)
    assert (
        requests.get(f"{cluster.server}/version", verify=str(cluster.ca_path), timeout=5).status_code == 200
    )


def test_plain_cluster_has_no_ca(sandbox_cluster):
    assert sandbox_cluster.server.startswith("http://127.0.0.1:")
    assert sandbox_cluster.ca_path is None


def test_nodes_carry_the_configured_accelerator_capacity(sandbox_cluster):
    nodes = client.CoreV1Api(sandbox_cluster.api_client()).list_node().items
    assert len(nodes) == 4
    for node in nodes:
        assert node.status.capacity["huawei.com/ascend-1980"] == "8"
        assert node.status.allocatable["huawei.com/ascend-1980"] == "8"
        assert {"cpu", "memory", "pods"} <= set(node.status.capacity)
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
