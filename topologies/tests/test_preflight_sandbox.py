"""Preflight against a real (sandbox) cluster over HTTP: facts come through ``kube``, findings are right."""

from __future__ import annotations

import json
import uuid

import pytest

from topologies.presets import preset_spec
from topologies.services import spec_preflight, topology_create, topology_preflight

pytestmark = pytest.mark.django_db


def _register(sandbox, name: str):  # type: ignore[no-untyped-def]
    from clusters.services import cluster_register

    return cluster_register(name=name, server=sandbox.server, token=sandbox.token)


def _create(sandbox, obj: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
    result = sandbox.kubectl("create", "-f", "-", input=json.dumps(obj))
    assert result.returncode == 0, result.stderr


def _service(sandbox, namespace: str, name: str, port: int) -> None:  # type: ignore[no-untyped-def]
    _create(
        sandbox,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"port": port, "targetPort": port}], "selector": {"app": name}},
        },
    )


def _namespace(sandbox) -> str:  # type: ignore[no-untyped-def]
    name = f"pf-{uuid.uuid4().hex[:8]}"
    _create(sandbox, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def _ascend(namespace: str, **overrides):  # type: ignore[no-untyped-def]
    return preset_spec("deepseek-ascend-mooncake", namespace=namespace, **overrides)


def _codes(findings) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.code for f in findings]


def test_seed_scenario_passes_on_matching_cluster(sandbox_cluster) -> None:
    cluster = _register(sandbox_cluster, "sb-clean")
    assert spec_preflight(cluster=cluster, spec=_ascend(_namespace(sandbox_cluster))) == []


def test_wrong_resource_name_names_what_nodes_offer(sandbox_cluster) -> None:
    cluster = _register(sandbox_cluster, "sb-resource")
    spec = _ascend(_namespace(sandbox_cluster))
    for role in spec["roles"].values():
        role["accelerator_resource"] = "huawei.com/Ascend910"
    findings = spec_preflight(cluster=cluster, spec=spec)
    wrong = [f for f in findings if f.code == "accelerator_resource_unknown"]
    assert len(wrong) == 2 and all(f.level == "error" for f in wrong)
    assert wrong[0].message.startswith(
        "no node offers `huawei.com/Ascend910`; nodes offer `huawei.com/ascend-1980` ("
    )


def test_missing_mooncake_master_then_present(sandbox_cluster) -> None:
    cluster = _register(sandbox_cluster, "sb-master")
    namespace = _namespace(sandbox_cluster)
    spec = _ascend(
        namespace,
        connector={"type": "mooncake-store", "master_address": f"mooncake-master.{namespace}.svc:50051"},
    )
    findings = spec_preflight(cluster=cluster, spec=spec)
    assert _codes(findings) == ["connector_backend_missing"]
    assert findings[0].field == "connector.master_address"
    _service(sandbox_cluster, namespace, "mooncake-master", 50051)
    assert spec_preflight(cluster=cluster, spec=spec) == []


def test_missing_namespace_will_be_created(sandbox_cluster) -> None:
    cluster = _register(sandbox_cluster, "sb-ns")
    findings = spec_preflight(cluster=cluster, spec=_ascend(f"absent-{uuid.uuid4().hex[:6]}"))
    assert [(f.level, f.code) for f in findings] == [("warning", "namespace_created")]


def test_foreign_object_with_same_name_conflicts(sandbox_cluster) -> None:
    cluster = _register(sandbox_cluster, "sb-conflict")
    namespace = _namespace(sandbox_cluster)
    _service(sandbox_cluster, namespace, "qwen3-nixl-router", 8000)
    spec = preset_spec("qwen-gpu-nixl", namespace=namespace, backend="deployments")
    for role in spec["roles"].values():
        role["accelerator_resource"] = "huawei.com/ascend-1980"
    findings = spec_preflight(cluster=cluster, spec=spec)
    assert _codes(findings) == ["object_conflict"]
    assert "Service " + namespace + "/qwen3-nixl-router already exists" in findings[0].message


def test_kthena_missing_blocks(sandbox_cluster_no_kthena) -> None:
    cluster = _register(sandbox_cluster_no_kthena, "sb-plain")
    findings = spec_preflight(cluster=cluster, spec=_ascend("default"))
    assert _codes(findings) == ["crds_missing"]
    assert spec_preflight(cluster=cluster, spec=_ascend("default", backend="deployments")) == []


def test_saved_topology_preflight_and_api(sandbox_cluster, api_client, viewer, operator) -> None:
    cluster = _register(sandbox_cluster, "sb-api")
    topology = topology_create(cluster=cluster, spec=_ascend(_namespace(sandbox_cluster)), actor=operator)
    assert topology_preflight(topology=topology) == []
    api_client.force_authenticate(operator)
    body = api_client.post(f"/api/v1/topologies/{topology.pk}/preflight/", {}, format="json").json()
    assert body == {"ok": True, "error_count": 0, "warning_count": 0, "findings": []}
    spec = _ascend("default")
    spec["roles"]["decode"]["replicas"] = 5  # 5 × 8 NPUs on 4 nodes of 8
    spec["roles"]["decode"]["accelerator_count"] = 8
    spec["roles"]["decode"]["tensor_parallel_size"] = 4
    spec["rebalancing"] = {"decode": {"min": 1, "max": 5}, "accelerator_budget": 44}
    body = api_client.post(
        "/api/v1/topologies/preflight/", {"cluster": cluster.pk, "spec": spec}, format="json"
    ).json()
    assert body["ok"] is False
    short = {f["field"]: f["message"] for f in body["findings"] if f["code"] == "accelerators_insufficient"}
    assert short["roles.decode.replicas"].startswith(
        "decode needs 5 pods × 8 `huawei.com/ascend-1980`; the nodes have room for 4"
    )
