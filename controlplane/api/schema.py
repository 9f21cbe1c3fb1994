"""The OpenAPI document as a contract: one error component, and every error status an operation can answer.

``error_responses`` is a drf-spectacular post-processing hook. It adds the shared ``Error`` component
(``{"error": {"code", "message", "fields"}}``, what ``controlplane.api.errors`` returns) and, on
each operation, the error statuses it can really answer:

- 401 (no or bad credentials), 403 (role or key scope), 429 (a key over its rate limit) and 503
  (the database or Redis is down) on every operation, since authentication, permissions, key
  limits and the outage middleware run before any view;
- 400 where there is a request body or a query parameter to get wrong;
- 404 where the path names an object, or a ``page`` can run past the end;
- 409 on writes (another job holds the topology, a name is taken, ...);
- 413 and 415 where a body is read (too large; not JSON or a form);
- and any other error status a view declares (adopt's 404: the workload named is gone), in its words.

The ``TopologySpec`` and ``StoredTopologySpec`` components are the spec parser's own schema
(``topologies.spec_schema``).
"""

from __future__ import annotations

from typing import Any

from topologies.spec_schema import spec_json_schema, stored_spec_json_schema

LIMIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "On a 429 only: the limit the request ran into, for programs (the message says the same).",
    "properties": {
        "name": {
            "type": "string",
            "description": "requests_per_minute, tokens_per_minute, max_concurrent, requests_per_day, "
            "requests_per_month, tokens_per_day, tokens_per_month or failed_authentications_per_minute",
        },
        "value": {"type": "integer", "description": "What the limit allows in its window"},
        "used": {"type": "integer", "description": "What was counted when this request was refused"},
        "resets_at": {
            "type": "string",
            "format": "date-time",
            "description": "When the window starts again, ISO 8601 UTC (max_concurrent: the earliest "
            "a slot may be free)",
        },
        "retry_after": {
            "type": "integer",
            "minimum": 1,
            "description": "Seconds until resets_at; the same as the Retry-After header",
        },
    },
    "required": ["name", "value", "used", "resets_at", "retry_after"],
    "additionalProperties": False,
}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every API error: a code, a message naming the field and the fix, and per-field messages.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Machine-readable, e.g. invalid, not_found"},
                "message": {"type": "string", "minLength": 1},
                "fields": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    "description": "Field path → what is wrong with it and how to fix it.",
                },
                "limit": LIMIT_SCHEMA,
            },
            "required": ["code", "message", "fields"],
            "additionalProperties": False,
        }
    },
    "required": ["error"],
    "additionalProperties": False,
}

DESCRIPTIONS = {
    "400": "The input is invalid; `error.fields` names each field and the fix.",
    "401": "No valid session or API key (`WWW-Authenticate: Bearer`).",
    "403": "The role or the key's scopes do not allow this.",
    "404": "No such object (or page).",
    "409": "Refused in the current state (e.g. another job holds the topology).",
    "413": "The body is too large.",
    "415": "The body is not JSON (or a form).",
    "429": "The API key is over its rate limit or quota: `error.limit` names it, its value and when it "
    "resets (`Retry-After` says when to retry).",
    "500": "An unexpected failure; details are in the server log, never in the answer.",
    "503": "The database or Redis is unavailable (`Retry-After` says when to retry).",
}

WRITE_METHODS = {"post", "put", "patch", "delete"}


def _statuses(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    statuses = ["401", "403", "429", "500", "503"]
    params = operation.get("parameters", [])
    has_query = any(p.get("in") == "query" for p in params)
    has_body = "requestBody" in operation
    if has_body or has_query:
        statuses.append("400")
    if "{" in path or any(p.get("name") == "page" for p in params):
        statuses.append("404")
    if method in WRITE_METHODS:
        statuses.append("409")
    if has_body:
        statuses += ["413", "415"]
    return sorted(statuses)


def error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    schemas["TopologySpec"] = spec_json_schema()
    schemas["StoredTopologySpec"] = stored_spec_json_schema()
    ref = {"$ref": "#/components/schemas/Error"}
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for code in _statuses(path, method, operation):
                if code in responses and "content" in responses[code]:
                    continue
                responses[code] = {
                    "description": DESCRIPTIONS[code],
                    "content": {"application/json": {"schema": ref}},
                }
            for code, response in responses.items():  # an error status a view declares (its own words)
                if code[0] in "45" and "content" not in response:
                    response["content"] = {"application/json": {"schema": ref}}
            operation["responses"] = dict(sorted(responses.items()))
    return result
