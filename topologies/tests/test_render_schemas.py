"""Rendered objects are valid: custom ones against the Kthena CRD schemas, built-ins against Kubernetes."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from topologies.render import render
from topologies.spec import TopologySpec
from topologies.tests.conftest import PROJECT_CRDS, UPSTREAM_CRDS, crd_schemas, spec_of

K8S_VERSION = "1.31.0"


def _variants() -> list[tuple[str, TopologySpec]]:
    """The seed scenarios on both backends, plus every other connector/engine shape the renderers emit."""
    out: list[tuple[str, TopologySpec]] = []
    for key, backend in itertools.product(
        ["deepseek-ascend-mooncake", "qwen-gpu-nixl", "qwen-sglang-mooncake"], ["kthena", "deployments"]
    ):
        out.append((f"{key}-{backend}", spec_of(key, backend=backend)))
    store = {"type": "mooncake-store", "master_address": "mooncake-master.dev.svc:50051"}
    datadist = {
        "type": "llm-datadist",
        "prefill_cluster_id": 1,
        "decode_cluster_id": 2,
        "cache_desc": {"num_tensors": 54, "shape": [2048, 128, 1, 576], "dtype": "bfloat16"},
    }
    for backend in ("kthena", "deployments"):
        out.append(
            (f"ascend-store-{backend}", spec_of("deepseek-ascend-mooncake", backend=backend, connector=store))
        )
        out.append((f"gpu-store-{backend}", spec_of("qwen-gpu-nixl", backend=backend, connector=store)))
        out.append(
            (
                f"gpu-lmcache-{backend}",
                spec_of("qwen-gpu-nixl", backend=backend, connector={"type": "lmcache"}),
            )
        )
        out.append(
            (
                f"ascend-datadist-{backend}",
                spec_of("deepseek-ascend-mooncake", backend=backend, connector=datadist),
            )
        )
        out.append(
            (
                f"mindie-{backend}",
                spec_of(
                    "deepseek-ascend-mooncake",
                    backend=backend,
                    engine="mindie",
                    connector=datadist,
                    image="swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.0.RC1-800I-A2-py311",
                ),
            )
        )
        aggregated = spec_of(
            "qwen-gpu-nixl",
            backend=backend,
            connector={"type": "none"},
            roles={
                "prefill": {"replicas": 0, "accelerator_resource": "nvidia.com/gpu", "accelerator_count": 1},
                "decode": {"replicas": 2, "accelerator_resource": "nvidia.com/gpu", "accelerator_count": 1},
            },
            rebalancing={"prefill": {"min": 0, "max": 0}, "decode": {"min": 1, "max": 4}},
        )
        out.append((f"aggregated-{backend}", aggregated))
    return out


VARIANTS = _variants()
PROJECT_SCHEMAS = crd_schemas(PROJECT_CRDS)


def _validate_custom(obj: dict[str, Any], schemas: dict[tuple[str, str], dict[str, Any]]) -> None:
    schema = schemas.get((obj["apiVersion"], obj["kind"]))
    assert schema is not None, f"no CRD schema for {obj['apiVersion']} {obj['kind']}"
    jsonschema.Draft7Validator(schema).validate(obj)


def _upstream_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """The upstream Kthena CRDs in ../shared; their absence fails the test instead of skipping a check."""
    if not UPSTREAM_CRDS.is_dir():
        pytest.fail(
            f"the upstream Kthena CRDs are expected at {UPSTREAM_CRDS} "
            "(CI checks out ../shared beside the repo)"
        )
    return crd_schemas(UPSTREAM_CRDS)


@pytest.mark.parametrize(("name", "spec"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_rendered_objects_validate_against_schemas(name: str, spec: TopologySpec) -> None:
    objects = render(spec, topology_id=11, revision=2)
    upstream = _upstream_schemas()
    for obj in objects:
        if obj["apiVersion"].endswith(".volcano.sh/v1alpha1"):
            _validate_custom(obj, PROJECT_SCHEMAS)
            _validate_custom(obj, upstream)
        else:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_missing_upstream_crds_fail_loudly(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import topologies.tests.test_render_schemas as this

    monkeypatch.setattr(this, "UPSTREAM_CRDS", tmp_path / "no-shared")
    with pytest.raises(pytest.fail.Exception, match="upstream Kthena CRDs are expected"):
        this._upstream_schemas()


def test_project_carries_the_kthena_crds_it_renders() -> None:
    assert {
        ("workload.serving.volcano.sh/v1alpha1", "ModelServing"),
        ("networking.serving.volcano.sh/v1alpha1", "ModelServer"),
        ("networking.serving.volcano.sh/v1alpha1", "ModelRoute"),
    } <= set(PROJECT_SCHEMAS)


def test_schema_check_rejects_an_invalid_model_server() -> None:
    objects = render(spec_of("qwen-gpu-nixl"), topology_id=1, revision=1)
    server = next(o for o in objects if o["kind"] == "ModelServer")
    server["spec"]["inferenceEngine"] = "MindIE"
    with pytest.raises(jsonschema.ValidationError):
        _validate_custom(server, PROJECT_SCHEMAS)


@pytest.mark.parametrize(("name", "spec"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_every_object_and_pod_template_carries_topology_labels(name: str, spec: TopologySpec) -> None:
    for obj in render(spec, topology_id=11, revision=2):
        labels = obj["metadata"]["labels"]
        assert labels["tandem.io/topology"] == "11" and labels["tandem.io/revision"] == "2"
        assert labels["app.kubernetes.io/managed-by"] == "tandem"
        templates: list[dict[str, Any]] = []
        if obj["kind"] == "ModelServing":
            templates = [r["entryTemplate"] for r in obj["spec"]["template"]["roles"]]
        elif obj["kind"] == "Deployment":
            templates = [obj["spec"]["template"]]
        for template in templates:
            pod_labels = template["metadata"]["labels"]
            assert pod_labels["tandem.io/role"] in ("prefill", "decode", "router")
            assert pod_labels["tandem.io/topology"] == "11"
            assert len(pod_labels["tandem.io/template-hash"]) == 10
            assert "tandem.io/revision" not in pod_labels


def test_every_imported_kthena_example_renders_pod_templates_the_schemas_accept() -> None:
    """What the pod-template overlays of Kthena's own P/D examples carry (init containers, sidecars,
    volumes, probes, ...) keeps the rendered objects valid on both backends: the ModelServing against
    Kthena's CRD schemas, each role's Deployment against Kubernetes' own (strict)."""
    from topologies.importing import import_manifests
    from topologies.tests.test_import_roundtrip import _cases

    schemas = (PROJECT_SCHEMAS, _upstream_schemas())
    for name, text in _cases():
        result = import_manifests(text)
        assert result.ok, (name, result.errors)
        assert any(result.spec["roles"][r]["pod_overlay"] for r in ("prefill", "decode")), name
        for backend in ("kthena", "deployments"):
            spec = TopologySpec.from_dict({**result.spec, "backend": backend})
            for obj in render(spec, topology_id=5, revision=1):
                if obj["kind"] == "ModelServing":
                    for known in schemas:
                        _validate_custom(obj, known)
                elif obj["kind"] == "Deployment" and not obj["metadata"]["name"].endswith("-router"):
                    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
