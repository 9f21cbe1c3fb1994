"""The base-URL mistakes of issue 25: a fallback base URL whose path doubles itself is refused naming
the field and the fix; a client whose base URL lacks /v1 gets a JSON 404 that says to add it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from controlplane.api.errors import DomainError
from gateway.services import doubled_path, route_update


@pytest.mark.parametrize(
    ("path", "fixed"),
    [
        ("/v1/v1", "/v1"),
        ("/api/v1/api/v1", "/api/v1"),
        ("/openai/v1/v1", "/openai/v1"),
        ("/v1", None),
        ("/api/v1", None),
        ("/v1/chat/v1", None),
        ("", None),
    ],
)
def test_a_path_that_repeats_itself_is_found(path, fixed):
    assert doubled_path(path) == fixed


MISTAKES = [
    ("http://fallback.example:8000/v1/v1", "http://fallback.example:8000/v1"),
    ("https://api.example.com/openai/v1/openai/v1/", "https://api.example.com/openai/v1"),
    ("https://api.example.com/v1/chat/completions", "https://api.example.com/v1"),
]


def test_a_fallback_base_url_that_doubles_its_path_is_refused_with_the_fix(make_topology, admin_user):
    topology = make_topology()
    for given, hint in MISTAKES:
        with pytest.raises(DomainError) as raised:
            route_update(topology=topology, changes={"fallback_base_url": given}, actor=admin_user)
        message = raised.value.fields["fallback_base_url"][0]
        assert hint in message, message
        route_update(topology=topology, changes={"fallback_base_url": hint}, actor=admin_user)
        topology.gateway_route.refresh_from_db()
        assert topology.gateway_route.fallback_base_url == hint


def asgi_call(path: str, method: str = "POST") -> tuple[int, dict[str, str], Any]:
    from controlplane.asgi import application

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b'{"model": "m"}', "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "method": method, "headers": [], "client": ("127.0.0.1", 1)}
    asyncio.run(application(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, json.loads(body)


@pytest.mark.parametrize("path", ["/chat/completions", "/completions", "/models", "/messages", "/responses"])
def test_a_base_url_without_v1_gets_a_json_404_saying_to_add_it(path):
    status, headers, body = asgi_call(path, "GET" if path == "/models" else "POST")
    assert status == 404
    assert headers["content-type"] == "application/json"
    assert body["error"]["code"] == "missing_v1"
    assert f"calls /v1{path}" in body["error"]["message"]
    assert "base URL to end in /v1" in body["error"]["message"]


def test_a_doubled_v1_gets_a_json_404_saying_to_drop_one():
    status, _headers, body = asgi_call("/v1/v1/chat/completions")
    assert status == 404
    assert body["error"]["code"] == "doubled_v1"
    assert "/v1/chat/completions" in body["error"]["message"]
