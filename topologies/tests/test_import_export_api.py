"""REST import (preview and save) and export (manifests stream, spec) of topology revisions."""

from __future__ import annotations

import pytest
import yaml

from audit.models import AuditEvent as AuditEntry
from topologies.importing import import_manifests
from topologies.models import Topology
from topologies.presets import PRESETS, preset_spec
from topologies.render import render
from topologies.spec import TopologySpec

pytestmark = pytest.mark.django_db
URL = "/api/v1/topologies/"

PLAIN = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama-prefill, namespace: serving}
spec:
  replicas: 2
  selector: {matchLabels: {app: llama-prefill}}
  template:
    metadata: {labels: {app: llama-prefill}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.1
        command: ["vllm", "serve"]
        args: ["meta-llama/Llama-3.1-8B", "--port", "8000", "--max-model-len", "8192",
               "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
        env: [{name: HF_TOKEN, value: hf_abc}, {name: VLLM_LOGGING_LEVEL, value: INFO}]
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: llama-decode, namespace: serving}
spec:
  replicas: 3
  selector: {matchLabels: {app: llama-decode}}
  template:
    metadata: {labels: {app: llama-decode}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.1
        command: ["vllm", "serve"]
        args: ["meta-llama/Llama-3.1-8B", "--port", "8000",
               "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Service
metadata: {name: llama-decode, namespace: serving}
spec: {selector: {app: llama-decode}, ports: [{port: 8000}]}
---
apiVersion: v1
kind: Secret
metadata: {name: hf, namespace: serving}
"""


def test_preview_of_a_plain_deployment_pair_says_what_it_mapped_kept_and_cannot_represent(
    api_client, operator
) -> None:
    api_client.force_authenticate(operator)
    response = api_client.post(f"{URL}import/", {"yaml": PLAIN}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["ok"] and body["source"] == "deployments"
    spec = body["spec"]
    assert (spec["name"], spec["namespace"], spec["backend"]) == ("llama", "serving", "deployments")
    assert spec["connector"]["type"] == "nixl" and spec["engine"] == "vllm"
    assert spec["roles"]["prefill"]["replicas"] == 2 and spec["roles"]["decode"]["replicas"] == 3
    assert spec["roles"]["prefill"]["extra_args"] == ["--max-model-len", "8192"]
    assert spec["roles"]["prefill"]["env"] == {"VLLM_LOGGING_LEVEL": "INFO"}
    unsupported = {n["source"]: n["message"] for n in body["report"]["unsupported"]}
    assert any("HF_TOKEN" in s and "Secret" in m for s, m in unsupported.items())
    assert "Secret/serving/hf" in unsupported
    verbatim = [n["target"] for n in body["report"]["verbatim"]]
    assert "extra_args" in verbatim and "env.VLLM_LOGGING_LEVEL" in verbatim
    assert not Topology.objects.exists()


def test_save_creates_the_topology_with_revision_one_and_an_audit_entry(
    api_client, operator, cluster
) -> None:
    api_client.force_authenticate(operator)
    response = api_client.post(
        f"{URL}import/", {"yaml": PLAIN, "cluster": cluster.pk, "preview": False}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["topology"]["name"] == "llama" and body["topology"]["current_revision"] == 1
    assert body["report"]["unsupported"]
    entry = AuditEntry.objects.get(action="topology.import")
    assert entry.detail["source"] == "deployments"


def test_what_the_yaml_lacks_is_named_and_overrides_fill_it_in(api_client, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    text = PLAIN.replace(
        ',\n               "--kv-transfer-config", \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'',
        "",
    )
    preview = api_client.post(f"{URL}import/", {"yaml": text}, format="json").json()
    assert not preview["ok"] and "spec.connector.type" in preview["errors"]
    refused = api_client.post(
        f"{URL}import/", {"yaml": text, "cluster": cluster.pk, "preview": False}, format="json"
    )
    assert refused.status_code == 400
    assert "spec.connector.type" in refused.json()["error"]["fields"]
    saved = api_client.post(
        f"{URL}import/",
        {"yaml": text, "cluster": cluster.pk, "preview": False, "overrides": {"connector": {"type": "nixl"}}},
        format="json",
    )
    assert saved.status_code == 201, saved.json()


@pytest.mark.parametrize(
    "text",
    ["a: [unclosed", "just a string", "", "kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}"],
    ids=["broken", "scalar", "empty", "no-workload"],
)
def test_bad_yaml_is_a_named_error_not_a_500(api_client, operator, text: str) -> None:
    api_client.force_authenticate(operator)
    response = api_client.post(f"{URL}import/", {"yaml": text}, format="json")
    assert response.status_code in (200, 400)
    body = response.json()
    if response.status_code == 200:
        assert not body["ok"] and body["errors"]["yaml"]
    else:
        assert "yaml" in body["error"]["fields"]


def test_viewer_cannot_import(api_client, viewer) -> None:
    api_client.force_authenticate(viewer)
    assert api_client.post(f"{URL}import/", {"yaml": PLAIN}, format="json").status_code == 403


@pytest.mark.parametrize("key", list(PRESETS))
def test_tandems_own_export_imports_back_to_the_same_spec(key: str) -> None:
    spec = TopologySpec.from_dict(preset_spec(key))
    exported = yaml.safe_dump_all(render(spec, topology_id=3, revision=1))
    result = import_manifests(exported, overrides={"slo": spec.to_dict()["slo"]})
    if spec.engine == "mindie":  # its engine reads a generated config file: the script is reported
        assert any("shell script" in n.message for n in result.report.of("unsupported"))
        return
    assert result.ok, result.errors
    want, got = spec.to_dict(), result.spec
    for field in ("name", "namespace", "engine", "image", "backend", "port", "model_name", "model_source"):
        assert got[field] == want[field], field
    assert got["connector"]["type"] == want["connector"]["type"]
    for role in ("prefill", "decode"):
        for field in (
            "replicas",
            "accelerator_resource",
            "accelerator_count",
            "tensor_parallel_size",
            "extra_args",
            "env",
            "cpu",
            "memory",
            "node_selector",
        ):
            assert got["roles"][role][field] == want["roles"][role][field], (role, field)


def test_export_gives_a_kubectl_ready_stream_and_the_spec(api_client, viewer, operator, cluster) -> None:
    api_client.force_authenticate(operator)
    created = api_client.post(
        URL, {"cluster": cluster.pk, "spec": preset_spec("qwen-gpu-nixl")}, format="json"
    ).json()
    api_client.force_authenticate(viewer)
    response = api_client.get(f"{URL}{created['id']}/revisions/1/manifests.yaml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    docs = [d for d in yaml.safe_load_all(response.content.decode()) if d]
    assert [d["kind"] for d in docs] == ["ModelServing", "ModelServer", "ModelRoute"]
    assert all(d["metadata"]["namespace"] and "status" not in d for d in docs)
    download = api_client.get(f"{URL}{created['id']}/revisions/1/spec.yaml?download=1")
    assert download["Content-Disposition"] == 'attachment; filename="qwen3-nixl-r1-spec.yaml"'
    assert yaml.safe_load(download.content) == created["spec"]
    refused = api_client.get(f"{URL}{created['id']}/revisions/1/spec.yaml?download=")
    assert refused.status_code == 400 and "download" in refused.json()["error"]["fields"]
    # The document describes the YAML as the stored spec it holds (schemathesis parses YAML bodies).
    from openapi_schema_validator import OAS30ReadValidator

    from tests.schema_contract import document

    doc = document()
    operation = doc["paths"]["/api/v1/topologies/{id}/revisions/{number}/spec.yaml"]["get"]
    declared = operation["responses"]["200"]["content"]["application/yaml"]["schema"]
    validator = OAS30ReadValidator({**declared, "components": doc["components"]})
    assert [e.message for e in validator.iter_errors(yaml.safe_load(download.content))] == []
    assert api_client.get(f"{URL}{created['id']}/revisions/9/spec.yaml").status_code == 404
    assert api_client.get(f"{URL}{created['id']}/revisions/1/secrets.yaml").status_code == 404


@pytest.mark.parametrize(
    "text",
    [
        "kind: ModelServing\nmetadata: {name: x}\nspec: 5",
        "kind: ModelServing\nmetadata: [1]\nspec: {template: {roles: [{name: prefill, entryTemplate: 3}]}}",
        "kind: ModelServing\nmetadata: {name: x}\n"
        "spec: {template: {roles: [{name: decode, replicas: lots}]}}",
        "kind: Deployment\nmetadata: {name: a-prefill}\nspec: {template: {spec: {containers: 7}}}",
        "kind: Deployment\nmetadata: {name: a-decode}\nspec: {replicas: [], template: []}",
        "kind: ModelServing\nmetadata: {name: x}\nspec: {template: {roles: [{name: decode, entryTemplate: "
        "{spec: {containers: [{name: vllm, image: vllm/vllm, args: 5, env: [1, {name: A}], "
        "resources: 3}]}}}]}}",
    ],
)
def test_documents_of_the_wrong_shape_are_named_errors(api_client, operator, text: str) -> None:
    api_client.force_authenticate(operator)
    response = api_client.post(f"{URL}import/", {"yaml": text, "overrides": {"roles": "x"}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert not body["ok"] and body["errors"]
