"""Bodies that used to end in a 500 or Django's HTML page: JSON nested 1,000 deep, bodies over the
size limit, NULs and lone surrogates. Every JSON endpoint answers 4xx in the API's error shape."""

from __future__ import annotations

import json

import pytest

from controlplane.api.parsers import MAX_JSON_DEPTH, JSONBodyError, loads_limited
from tests.faults.fuzz_support import error_shape_problem, fill_path, module_world, write_endpoints

pytestmark = pytest.mark.django_db

JSON_ENDPOINTS = [e for e in write_endpoints() if e.fields]
NESTED_LIST = "[" * 1000 + "]" * 1000  # 2 KB
NESTED_OBJECT = '{"a":' * 1000 + "1" + "}" * 1000


def _assert_error_shape(response, status: int) -> dict:
    assert response.status_code == status, response.content[:300]
    problem = error_shape_problem(response.status_code, response["Content-Type"], response.content)
    assert problem is None, problem
    return response.json()["error"]


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with module_world(django_db_blocker) as world:
        yield world


@pytest.mark.parametrize("endpoint", JSON_ENDPOINTS, ids=str)
@pytest.mark.parametrize(
    "raw", [NESTED_LIST, NESTED_OBJECT, '{"spec": ' + NESTED_OBJECT + "}"], ids=["list", "object", "in-spec"]
)
def test_json_nested_1000_deep_is_a_400_in_the_error_shape(api_client, admin_user, world, endpoint, raw):
    api_client.force_login(admin_user)
    path = fill_path(endpoint.path, str(world.ids.get(endpoint.resource, 1)))
    response = api_client.generic(endpoint.method, path, raw, content_type="application/json")
    error = _assert_error_shape(response, 400)
    assert error["code"] == "parse_error"
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in error["message"]


def test_a_body_over_the_size_limit_is_a_413_in_the_error_shape_not_an_html_page(
    client, admin_user, settings
):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    client.force_login(admin_user)
    body = json.dumps({"username": "x" * 20_000, "password": "p"})
    response = client.post("/api/v1/users/", body, content_type="application/json")
    error = _assert_error_shape(response, 413)
    assert error["code"] == "payload_too_large"
    assert "at most 10000 bytes" in error["message"]
    # A form-encoded body over the limit, refused the same way (Django's own check answered HTML).
    response = client.post(
        "/api/v1/users/", "username=" + "x" * 20_000, content_type="application/x-www-form-urlencoded"
    )
    _assert_error_shape(response, 413)


def test_too_many_form_fields_under_api_is_a_400_in_the_error_shape(client, admin_user, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    client.force_login(admin_user)
    response = client.post(
        "/api/v1/users/",
        "&".join(f"f{i}=1" for i in range(50)),
        content_type="application/x-www-form-urlencoded",
    )
    error = _assert_error_shape(response, 400)
    assert "more form fields or files" in error["message"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"username": "a\\u0000b"}', "NUL character"),
        (b'{"username": "\\ud800"}', "not UTF-8"),
        (b'{"x": NaN}', "NaN is not a JSON number"),
        (b'{"x": 1' + b"0" * 5000 + b"}", "not valid JSON"),
        (b"\xff{}", "not UTF-8"),
    ],
)
def test_bodies_postgres_or_python_cannot_hold_are_refused_by_the_parser(
    api_client, admin_user, raw, expected
):
    api_client.force_login(admin_user)
    response = api_client.generic("POST", "/api/v1/users/", raw, content_type="application/json")
    error = _assert_error_shape(response, 400)
    assert expected in error["message"]


def test_loads_limited_keeps_ordinary_bodies_and_names_the_depth():
    assert loads_limited(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_limited(nested) == json.loads(nested)
    with pytest.raises(JSONBodyError, match="nested deeper"):
        loads_limited("[" + nested + "]")
