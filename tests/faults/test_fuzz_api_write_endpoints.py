"""Property-based fuzz of every write endpoint of the REST API, as an admin: whatever the body, path or
content type, the answer is never a 5xx, and every 4xx carries the API's error shape.

The endpoints come from the OpenAPI schema (a new endpoint is fuzzed automatically). Bodies are
generated: valid bodies with one part replaced by a hostile value, objects of the schema's fields
with hostile values, deep nesting, wrong top-level types, huge strings, Unicode digits, control and
bidi characters, NULs, lone surrogates, extra fields, raw bytes and form-encoded bodies; path ids are
real, missing, huge or not numbers at all. Each example runs in a savepoint that is rolled back, so
every request meets the same world.

Budget: FUZZ_API_EXAMPLES requests in all (default 1000, weighted towards endpoints that read a
body; about 80 s on two cores, most of it in the endpoints that call the unreachable cluster with
retries). The count and statuses are printed at the end and written to var/faults/fuzz-api.json.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from tests.faults.fuzz_support import (
    HOSTILE_TEXTS,
    Endpoint,
    Tally,
    error_shape_problem,
    fill_path,
    module_world,
    write_endpoints,
)

ENDPOINTS = write_endpoints()
TOTAL_EXAMPLES = int(os.environ.get("FUZZ_API_EXAMPLES", "1000"))
# An endpoint that reads a body gets four times the examples of one that reads none (its path is
# still fuzzed); together they make TOTAL_EXAMPLES requests.
_WEIGHTS = {str(e): (4 if e.fields else 1) for e in ENDPOINTS}
_UNIT = TOTAL_EXAMPLES / max(1, sum(_WEIGHTS.values()))
TALLY = Tally("fuzz-api")


def examples_for(endpoint: Endpoint) -> int:
    return max(5, math.ceil(_UNIT * _WEIGHTS[str(endpoint)]))


FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

# --- strategies -----------------------------------------------------------------------------------

texts = st.one_of(
    st.sampled_from(HOSTILE_TEXTS),
    st.text(max_size=30),
    st.builds(
        lambda ch, n: ch * n,
        st.sampled_from(["a", "é", "9", "\x00", "八", " "]),
        st.sampled_from([300, 70000]),
    ),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 10**20]),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
values = st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)


def deep(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)


def _leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            paths.extend(_leaf_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths.extend(_leaf_paths(child, (*prefix, index)))
    return paths


def _replace(body: Any, path: tuple[Any, ...], new: Any, *, delete: bool) -> Any:
    target = body
    for step in path[:-1]:
        target = target[step]
    if delete and isinstance(target, dict):
        target.pop(path[-1], None)
    else:
        target[path[-1]] = new
    return body


@st.composite
def bodies(draw: st.DrawFn, endpoint: Endpoint, template: dict[str, Any]) -> tuple[bytes, str, str]:
    """(raw body, content type, what kind) for one request."""
    kind = draw(
        st.sampled_from(
            ["mutate", "mutate", "mutate", "fields", "value", "deep", "deep-field", "raw", "form", "extra"]
        )
    )
    if kind == "mutate" and template:
        body = json.loads(json.dumps(template))  # a fresh copy: the template is shared by every example
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            paths = _leaf_paths(body)
            if not paths:
                break
            body = _replace(body, draw(st.sampled_from(paths)), draw(values), delete=draw(st.booleans()))
        return json.dumps(body).encode(), "application/json", kind
    if kind in ("mutate", "fields"):
        names = list(endpoint.fields) or ["id"]
        body = draw(st.dictionaries(st.sampled_from(names), values, max_size=len(names)))
        return json.dumps(body).encode(), "application/json", "fields"
    if kind == "value":
        return json.dumps(draw(values)).encode(), "application/json", kind
    if kind == "deep":
        raw = deep(draw(st.sampled_from([33, 200, 1000, 5000])), draw(st.sampled_from(["list", "dict"])))
        return raw.encode(), "application/json", kind
    if kind == "deep-field":
        name = draw(st.sampled_from(list(endpoint.fields) or ["spec"]))
        raw = "{" + json.dumps(name) + ": " + deep(draw(st.sampled_from([40, 1000])), "dict") + "}"
        return raw.encode(), "application/json", kind
    if kind == "raw":
        raw = draw(
            st.one_of(
                st.binary(max_size=64),
                st.sampled_from(
                    [b"{", b'{"a":', b"\xff\xfe", b"NaN", b"[1,]", b'{"a":1}{"b":2}', b"1" * 5000]
                ),
            )
        )
        content_type = draw(st.sampled_from(["application/json", "text/plain", "application/xml"]))
        return raw, content_type, kind
    if kind == "form":
        names = list(endpoint.fields) or ["id"]
        pairs = draw(st.dictionaries(st.sampled_from(names), st.sampled_from(HOSTILE_TEXTS), max_size=4))
        safe = {k: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace") for k, v in pairs.items()}
        return urlencode(safe).encode(), "application/x-www-form-urlencoded", kind
    body = json.loads(json.dumps(template or {}))
    extras = draw(st.dictionaries(texts, values, min_size=1, max_size=3))
    return json.dumps({**body, **extras}).encode(), "application/json", "extra"


def path_values(world_id: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(str(world_id)),
        st.just(str(world_id)),
        st.sampled_from(
            ["0", "999999", "99999999999999999999", "-1", "١", "²", "abc", "1.5", "%00", "%E2%80%AE"]
        ),
    )


# --- the test -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with module_world(django_db_blocker) as world:
        yield world


@pytest.fixture(scope="module", autouse=True)
def _report(request: pytest.FixtureRequest):
    yield
    path = TALLY.write()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n{TALLY.line()} (written to {path})")


def test_the_schema_lists_every_write_endpoint_of_the_api():
    assert len(ENDPOINTS) >= 20
    assert {str(e) for e in ENDPOINTS} >= {
        "POST /api/v1/clusters/",
        "PATCH /api/v1/clusters/{id}/",
        "POST /api/v1/topologies/preflight/",
        "POST /api/v1/topologies/{id}/scale/",
        "DELETE /api/v1/users/{id}/",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_no_body_or_path_gets_a_5xx_and_every_4xx_has_the_error_shape(endpoint: Endpoint, admin_user, world):
    client = APIClient()
    client.force_login(admin_user)
    template = world.template(endpoint)
    world_id = world.ids.get(endpoint.resource, 1)

    @settings(FUZZ, max_examples=examples_for(endpoint))
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        path = fill_path(endpoint.path, data.draw(path_values(world_id), label="path id"))
        raw, content_type, kind = data.draw(bodies(endpoint, template), label="body")
        with transaction.atomic():
            response = client.generic(endpoint.method, path, raw, content_type=content_type)
            transaction.set_rollback(True)
        TALLY.add(str(endpoint), response.status_code)
        assert response.status_code < 500, (kind, path, raw[:300], response.content[:500])
        if response.status_code >= 400:
            problem = error_shape_problem(
                response.status_code, response.get("Content-Type", ""), response.content
            )
            assert problem is None, (kind, path, raw[:300], problem)

    run()
