"""Property-based test over /api/v1/schema/: requests generated from the document itself.

Every operation the schema lists (reads too, with their query parameters) and OPTIONS on every path
get requests whose path ids, query values and JSON bodies Hypothesis draws from the operation's own
parameter and body schemas, mixed with values of the wrong type. No answer may be a 5xx, and every
answer must match the document (status and body, checked by tests/schema_contract.py). The number
of requests is bounded (``SCHEMA_PROPERTY_EXAMPLES``, default 600) so the run stays well under two
minutes.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from tests import schema_contract
from tests.faults.fuzz_support import module_world

pytestmark = pytest.mark.django_db

TOTAL = int(os.environ.get("SCHEMA_PROPERTY_EXAMPLES", "600"))
DOC = schema_contract.document()
COMPONENTS = DOC["components"]["schemas"]
OPERATIONS = [
    (method.upper(), path, operation)
    for path, item in DOC["paths"].items()
    for method, operation in item.items()
    if isinstance(operation, dict) and "responses" in operation and path.startswith("/api/")
]
PATHS = sorted(p for p in DOC["paths"] if p.startswith("/api/"))  # /v1/: the gateway, outside Django
PER_OPERATION = max(4, math.ceil(TOTAL * 0.85 / max(1, len(OPERATIONS))))
PER_OPTIONS = max(2, math.ceil(TOTAL * 0.15 / max(1, len(PATHS))))

SETTINGS = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))

wrong_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["-1", "1.5", "0", "", "true", "null", "[]", "9" * 30, "x" * 300]),
)


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = COMPONENTS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def from_schema(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that mostly fit ``schema`` (OpenAPI 3.0), now and then of the wrong type."""
    schema = _resolve(schema)
    options: list[st.SearchStrategy[Any]] = []
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            options += [from_schema(s, depth + 1) for s in schema[key]]
    kind = schema.get("type")
    if "enum" in schema:
        options.append(st.sampled_from([v for v in schema["enum"] if v is not None] or [None]))
    elif kind == "integer":
        lo, hi = schema.get("minimum", -(2**31)), schema.get("maximum", 2**31)
        options.append(st.integers(min_value=lo - 1, max_value=hi + 1))
    elif kind == "number":
        options.append(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
    elif kind == "boolean":
        options.append(st.booleans())
    elif kind == "string":
        if schema.get("format") == "date-time":
            options.append(st.datetimes().map(lambda d: d.isoformat()))
        options.append(st.text(max_size=min(schema.get("maxLength", 40), 40)))
        if schema.get("pattern"):
            options.append(st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: len(s) < 80))
    elif kind == "array" and depth < 4:
        options.append(st.lists(from_schema(schema.get("items", {}), depth + 1), max_size=3))
    elif (kind == "object" or "properties" in schema) and depth < 5:
        properties = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in properties]
        optional = {k: v for k, v in properties.items() if k not in required and not v.get("readOnly")}
        options.append(
            st.fixed_dictionaries(
                {k: from_schema(properties[k], depth + 1) for k in required},
                optional={k: from_schema(v, depth + 1) for k, v in optional.items()},
            )
        )
    if schema.get("nullable"):
        options.append(st.none())
    if not options:
        return wrong_values
    return st.one_of(*options) if depth else st.one_of(st.one_of(*options), wrong_values.map(lambda v: v))


def _query(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with module_world(django_db_blocker) as world:
        yield world


def _path_id(world: Any, template: str) -> st.SearchStrategy[str]:
    resource = template.removeprefix("/api/v1/").split("/", 1)[0]
    known = world.ids.get(resource, 1)
    return st.one_of(
        st.just(str(known)),
        st.just(str(known)),
        st.integers(min_value=-5, max_value=10**12).map(str),
        st.sampled_from(["1.5", "abc", "0", "%20", "99999999999999999999"]),
    )


def _request(draw: Any, world: Any, method: str, template: str, operation: dict[str, Any]) -> dict[str, Any]:
    path = template
    for name in re.findall(r"\{([^}]+)\}", template):
        value = draw(_path_id(world, template), label=f"path {name}")
        if name == "number":
            value = draw(st.sampled_from(["1", "2", value]), label="revision")
        path = path.replace("{" + name + "}", value, 1)
    query = {}
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "query":
            continue
        if parameter.get("required") or draw(st.booleans(), label=f"send {parameter['name']}"):
            query[parameter["name"]] = _query(
                draw(from_schema(parameter.get("schema", {})), label=parameter["name"])
            )
    body: Any = None
    content = (operation.get("requestBody") or {}).get("content", {})
    if "application/json" in content:
        template_body = world.template(_Endpoint(method, template))
        body = draw(
            st.one_of(st.just(template_body), from_schema(content["application/json"]["schema"]))
            if template_body
            else from_schema(content["application/json"]["schema"]),
            label="body",
        )
    return {"path": path, "query": query, "body": body}


class _Endpoint:
    def __init__(self, method: str, path: str) -> None:
        self.method, self.path = method, path


def _send(client: APIClient, method: str, request: dict[str, Any]) -> Any:
    from urllib.parse import urlencode

    url = request["path"] + ("?" + urlencode(request["query"]) if request["query"] else "")
    raw = (
        b""
        if request["body"] is None and method in ("GET", "DELETE", "OPTIONS")
        else json.dumps(request["body"]).encode()
    )
    with transaction.atomic():
        response = client.generic(method, url, raw, content_type="application/json")
        transaction.set_rollback(True)
    return response


@pytest.mark.parametrize(
    ("method", "template", "operation"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_generated_requests_get_no_5xx_and_answers_match_the_schema(
    method, template, operation, world, admin_user
):
    client = APIClient()
    client.force_login(admin_user)

    @settings(SETTINGS, max_examples=PER_OPERATION)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        request = _request(data.draw, world, method, template, operation)
        schema_contract.problems.clear()
        response = _send(client, method, request)
        assert response.status_code < 500, (request, response.content[:500])
        found = list(schema_contract.problems)
        schema_contract.problems.clear()
        assert not found, (request, found)

    run()


@pytest.mark.parametrize("template", PATHS)
def test_options_on_every_path_is_not_a_server_error(template, world, admin_user, viewer):
    clients = [APIClient(), APIClient()]
    clients[0].force_login(admin_user)
    clients[1].force_login(viewer)

    @settings(SETTINGS, max_examples=PER_OPTIONS)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        path = template
        for name in re.findall(r"\{([^}]+)\}", template):
            path = path.replace("{" + name + "}", data.draw(_path_id(world, template)), 1)
        client = data.draw(st.sampled_from(clients))
        response = client.options(path)
        assert response.status_code < 500, (path, response.content[:500])

    run()


def test_known_server_errors_are_gone(world, admin_user):
    client = APIClient()
    client.force_login(admin_user)
    topology = world.ids["topologies"]
    for action in ("deploy", "reapply", "rollback", "scale"):
        assert client.options(f"/api/v1/topologies/{topology}/{action}/").status_code == 200
    assert client.options(f"/api/v1/deployments/{world.ids['deployments']}/cancel/").status_code == 200
    response = client.get("/api/v1/deployments/?page_size=-1&topology=1.5")
    assert response.status_code == 400, response.content
    assert "topology" in response.json()["error"]["fields"]


def test_gateway_aliases_of_the_wrong_type_are_a_400_naming_the_field(world, admin_user):
    client = APIClient()
    client.force_login(admin_user)
    for aliases in (0, "qwen", {"a": 1}, [["nested"]]):
        response = client.patch(
            f"/api/v1/topologies/{world.ids['topologies']}/gateway/", {"aliases": aliases}, format="json"
        )
        assert response.status_code == 400, (aliases, response.content)
        assert any(name.startswith("aliases") for name in response.json()["error"]["fields"])
