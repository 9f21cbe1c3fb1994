"""The CRDs' CEL rules (x-kubernetes-validations) hold in the sandbox as on a real API server."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from sandbox.apiserver.cel import cel_causes
from sandbox.apiserver.resources import load_crd_documents, resource_type_from_crd

GROUP, VERSION, PLURAL = "networking.serving.volcano.sh", "v1alpha1", "modelroutes"


def _schema(plural: str) -> dict:
    crd = next(d for d in load_crd_documents() if d["spec"]["names"]["plural"] == plural)
    return resource_type_from_crd(crd).schema


def _route(name: str = "route", model: str = "qwen", **target) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ModelRoute",
        "metadata": {"name": name},
        "spec": {
            "modelName": model,
            "rules": [{"name": "default", "targetModels": [target or {"modelServerName": "qwen-server"}]}],
        },
    }


def test_transition_rules_run_only_on_update_against_the_old_value():
    schema = _schema("modelroutes")
    assert cel_causes(schema, _route()) == []
    assert cel_causes(schema, _route(model="llama"), _route()) == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.modelName",
            "message": 'Invalid value: "string": modelName is immutable',
        }
    ]
    assert cel_causes(schema, _route(), _route()) == []


def test_plain_rules_check_array_items():
    causes = cel_causes(_schema("modelroutes"), _route(modelServerName="a", externalModelProviderName="b"))
    assert [c["field"] for c in causes] == ["spec.rules[0].targetModels[0]"]
    assert "exactly one of modelServerName or externalModelProviderName" in causes[0]["message"]


def test_changing_a_model_routes_model_name_is_a_422(custom, namespace):
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _route())
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "route", {"spec": {"modelName": "llama"}}
        )
    assert exc.value.status == 422
    status = json.loads(exc.value.body)
    assert status["details"]["causes"][0]["field"] == "spec.modelName"
    assert status["message"].endswith('spec.modelName: Invalid value: "string": modelName is immutable')
    unchanged = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "route")
    assert unchanged["spec"]["modelName"] == "qwen"


def test_a_target_with_two_backends_is_refused_at_create(custom, namespace):
    with pytest.raises(ApiException) as exc:
        body = _route(name="both", modelServerName="a", externalModelProviderName="b")
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert exc.value.status == 422
