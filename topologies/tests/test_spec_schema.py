"""The spec's JSON schema is read off the parser, so the two describe the same fields and limits."""

from __future__ import annotations

import pytest
from openapi_schema_validator import OAS30ReadValidator, OAS30WriteValidator

from topologies.presets import PRESETS, preset_spec
from topologies.spec import CONNECTORS, ENGINES, TopologySpec
from topologies.spec_schema import spec_fields, spec_json_schema, stored_spec_json_schema


def _node(schema: dict, path: str) -> dict:
    for part in path.split("."):
        schema = schema["properties"][part]
    return schema


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_presets_fit_the_request_schema_and_their_stored_form_the_stored_schema(key):
    raw = preset_spec(key)
    OAS30WriteValidator(spec_json_schema()).validate(raw)
    OAS30ReadValidator(stored_spec_json_schema()).validate(TopologySpec.from_dict(raw).to_dict())


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_every_field_the_parser_returns_is_in_the_schema(key):
    for path in spec_fields(TopologySpec.from_dict(preset_spec(key))):
        _node(stored_spec_json_schema(), path)  # KeyError names a field the schema lacks


def test_limits_and_choices_are_the_parsers():
    schema = spec_json_schema()
    assert _node(schema, "engine")["enum"] == list(ENGINES)
    assert _node(schema, "connector.type")["enum"] == list(CONNECTORS)
    replicas = _node(schema, "roles.decode.replicas")
    assert (replicas["minimum"], replicas["maximum"]) == (0, 256)
    assert _node(schema, "port")["maximum"] == 65535
    assert set(schema["required"]) == {"name", "model_name", "engine", "image", "connector", "roles"}
    assert "cache_desc" not in _node(schema, "connector").get("required", [])
    assert _node(schema, "connector.cache_desc")["required"] == ["num_tensors", "shape", "dtype"]


def test_a_value_the_parser_refuses_for_range_is_outside_the_schema():
    raw = preset_spec("qwen-gpu-nixl")
    raw["roles"]["decode"]["replicas"] = 257
    errors = list(OAS30WriteValidator(spec_json_schema()).iter_errors(raw))
    assert [list(e.absolute_path) for e in errors] == [["roles", "decode", "replicas"]]


@pytest.mark.django_db
def test_the_api_schema_describes_the_spec_not_a_string(client, viewer):
    client.force_login(viewer)
    import yaml

    document = yaml.safe_load(client.get("/api/v1/schema/").content)
    schemas = document["components"]["schemas"]
    sent = schemas["TopologyCreateRequest"]["properties"]["spec"]
    assert sent["allOf"] == [{"$ref": "#/components/schemas/TopologySpec"}]
    stored = schemas["Topology"]["properties"]["spec"]
    assert stored.get("$ref", (stored.get("allOf") or [{}])[0].get("$ref")).endswith("/StoredTopologySpec")
    assert schemas["TopologySpec"]["properties"]["roles"]["properties"]["prefill"]["type"] == "object"
