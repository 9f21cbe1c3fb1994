"""/v1/traces in the OpenAPI document: the OTLP/HTTP trace receiver, as served (traces.receiver)."""

from __future__ import annotations

from typing import Any

_STATUS = {
    "type": "object",
    "description": "google.rpc.Status (in protobuf when the request was protobuf)",
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
    "required": ["code", "message"],
}
_ANSWER = {
    "type": "object",
    "description": "ExportTraceServiceResponse: empty when every span was accepted",
    "properties": {
        "partialSuccess": {
            "type": "object",
            "properties": {
                "rejectedSpans": {"type": "string", "description": "int64 as a string (OTLP/JSON)"},
                "errorMessage": {"type": "string"},
            },
        }
    },
}
_BINARY = {"type": "string", "format": "binary"}
_REFUSALS = {
    "400": "The body is not an export request; the message says what is wrong.",
    "401": "No API key, or an unknown, expired or revoked one.",
    "403": "The key lacks the `traces:write` scope (use a key of the telemetry purpose).",
    "413": "The export request is over TRACES_MAX_BODY_MB (inflated, when gzip).",
    "415": "A content type other than application/x-protobuf or application/json, or an encoding "
    "other than gzip.",
    "429": "The key's rate limit; `Retry-After` says when to retry.",
    "503": "Tandem could not store the spans now (retryable, `Retry-After: 5`).",
}


def paths() -> dict[str, dict[str, Any]]:
    failed = {"application/json": {"schema": _STATUS}, "application/x-protobuf": {"schema": _BINARY}}
    return {
        "/v1/traces": {
            "post": {
                "operationId": "traces_export",
                "summary": "Receive trace spans (OTLP/HTTP): the engines' spans of kept requests",
                "description": "ExportTraceServiceRequest in protobuf or its JSON mapping; spans of traces "
                "not kept are accepted and dropped. See docs/traces.md.",
                "tags": ["gateway"],
                "security": [{"inferenceKey": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-protobuf": {"schema": _BINARY},
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "resourceSpans": {"type": "array", "items": {"type": "object"}}
                                },
                            }
                        },
                    },
                },
                "responses": {
                    "200": {
                        "description": "Accepted; partialSuccess counts the spans rejected "
                        "(bad ids, an end before the start).",
                        "content": {
                            "application/json": {"schema": _ANSWER},
                            "application/x-protobuf": {"schema": _BINARY},
                        },
                    },
                    **{
                        status: {"description": text, "content": failed} for status, text in _REFUSALS.items()
                    },
                },
            }
        }
    }
