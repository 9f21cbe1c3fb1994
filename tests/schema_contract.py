"""Every API answer a test sees is checked against the OpenAPI document (status and body).

``install()`` wraps ``django.test.Client.request`` (DRF's ``APIClient`` goes through it too): for a
path under ``/api/`` the answer's status must be one the operation documents, and its JSON body
must validate against that status's schema. A path or method the document lacks may only answer
the error shape with 401/403/404/405/429/500/503 (OPTIONS: anything below 500). Problems are collected
and the root conftest fails the test that saw them, so a ``try``/``except`` in a test cannot hide one.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from openapi_schema_validator import OAS30ReadValidator, oas30_format_checker

OUTSIDE_SCHEMA = {"/api/v1/schema/", "/api/v1/docs/"}
UNDOCUMENTED_OK = {401, 403, 404, 405, 429, 500, 503}

_lock = threading.Lock()
_document: dict[str, Any] | None = None
_routes: list[tuple[re.Pattern[str], str]] = []
problems: list[str] = []
checked: list[int] = [0]


def document() -> dict[str, Any]:
    global _document
    with _lock:
        if _document is None:
            from drf_spectacular.generators import SchemaGenerator

            doc = SchemaGenerator().get_schema(request=None, public=True)
            _document = json.loads(json.dumps(doc, default=str))
            routes = []
            for template in _document["paths"]:
                pattern = "[^/]+".join(re.escape(part) for part in re.split(r"\{[^}]+\}", template))
                routes.append((re.compile(f"^{pattern}$"), template))
            # Literal segments win over parameters (/topologies/preflight/ before /topologies/{id}/).
            routes.sort(key=lambda route: route[1].count("{"))
            _routes[:] = routes
        return _document


def operation_for(path: str, method: str) -> tuple[str | None, dict[str, Any] | None]:
    doc = document()
    for pattern, template in _routes:
        if pattern.match(path):
            return template, doc["paths"][template].get(method.lower())
    return None, None


def _closed(node: Any) -> Any:
    """The schema with every object that lists its properties closed to others: an answer carrying a
    field the document does not describe is a mismatch, not a pass."""
    if isinstance(node, dict):
        out = {key: _closed(value) for key, value in node.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_closed(item) for item in node]
    return node


_closed_components: dict[str, Any] = {}


def _schema_problems(schema: dict[str, Any], body: Any) -> list[str]:
    if not _closed_components:
        _closed_components.update(_closed(document()["components"]))
    root = {**_closed(schema), "components": _closed_components}
    validator = OAS30ReadValidator(root, format_checker=oas30_format_checker)
    out = []
    for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path) or "(body)"
        out.append(f"{where}: {error.message[:300]}")
    return out[:5]


def _is_error_shape(body: Any) -> bool:
    return not _schema_problems({"$ref": "#/components/schemas/Error"}, body)


def check(method: str, path: str, status: int, content_type: str, content: bytes) -> list[str]:
    """What is wrong with this answer according to the document (an empty list: nothing)."""
    if not path.startswith("/api/") or path in OUTSIDE_SCHEMA:
        return []
    checked[0] += 1
    label = f"{method} {path} → {status}"
    body: Any = None
    if content and "json" in content_type:
        try:
            body = json.loads(content)
        except ValueError:
            return [f"{label}: the body is not JSON although Content-Type is {content_type}"]
    template, operation = operation_for(path, method)
    if operation is None:
        if method == "OPTIONS":
            return [f"{label}: OPTIONS answered a server error"] if status >= 500 else []
        if method == "HEAD":
            return []
        if status not in UNDOCUMENTED_OK or not _is_error_shape(body):
            where = "no such path" if template is None else f"{template} has no {method}"
            return [
                f"{label}: the schema has {where}; only an error-shape {sorted(UNDOCUMENTED_OK)} may answer"
            ]
        return []
    responses = operation["responses"]
    response = responses.get(str(status))
    if response is None:
        return [f"{label}: status not in the schema of {method} {template} (documented: {sorted(responses)})"]
    media = response.get("content", {})
    if not media:
        if content and status != 204:
            return [f"{label}: the schema documents no body, but one was sent"]
        if status == 204 and content:
            return [f"{label}: a 204 with a body"]
        return []
    schema = next(iter(media.values())).get("schema")
    if schema is None or "json" not in next(iter(media)):
        return []
    if "json" not in content_type:
        return [f"{label}: Content-Type {content_type!r}, the schema says {next(iter(media))}"]
    return [f"{label}: {problem}" for problem in _schema_problems(schema, body)]


def install() -> None:
    from django.test import client

    if getattr(client.Client.request, "_schema_checked", False):
        return
    original = client.Client.request

    def request(self: Any, **environ: Any) -> Any:
        response = original(self, **environ)
        try:
            path = environ.get("PATH_INFO", "")
            method = environ.get("REQUEST_METHOD", "GET").upper()
            if path.startswith("/api/") and not getattr(response, "streaming", False):
                found = check(
                    method, path, response.status_code, response.get("Content-Type", ""), response.content
                )
                problems.extend(found)
        except Exception as exc:  # a broken check must show up, not pass silently
            problems.append(f"schema check failed on {environ.get('PATH_INFO')}: {exc!r}")
        return response

    request._schema_checked = True  # type: ignore[attr-defined]
    client.Client.request = request  # type: ignore[method-assign]
