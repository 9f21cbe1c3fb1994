"""The gateway's ``POST /v1/responses`` in the OpenAPI document, as the gateway serves it.

The gateway is a lean ASGI app outside DRF, so drf-spectacular cannot see it; ``responses_path`` is a
post-processing hook that adds the path and its components. ``gateway/tests/test_responses_schema.py``
holds the served answers, events and errors to these schemas.
"""

from __future__ import annotations

from typing import Any

REF = "#/components/schemas/"
TEXT_PART = {
    "type": "object",
    "properties": {
        "type": {"enum": ["input_text", "output_text", "text", "summary_text", "refusal"]},
        "text": {"type": "string"},
    },
    "required": ["type"],
}
IMAGE_PART = {
    "type": "object",
    "properties": {"type": {"const": "input_image"}, "image_url": {"type": "string"}},
    "required": ["type", "image_url"],
}
INPUT_ITEM = {
    "oneOf": [
        {
            "type": "object",
            "description": "A message; `type` may be left out when `role` is given.",
            "properties": {
                "type": {"const": "message"},
                "role": {"enum": ["system", "developer", "user", "assistant"]},
                "content": {
                    "oneOf": [
                        {"type": "string"},
                        {"type": "array", "items": {"oneOf": [TEXT_PART, IMAGE_PART]}},
                    ]
                },
            },
            "required": ["role", "content"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "function_call"},
                "call_id": {"type": "string", "minLength": 1},
                "name": {"type": "string", "minLength": 1},
                "namespace": {"type": "string"},
                "arguments": {"type": "string"},
            },
            "required": ["type", "call_id", "name"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "function_call_output"},
                "call_id": {"type": "string", "minLength": 1},
                "output": {"oneOf": [{"type": "string"}, {"type": "array", "items": TEXT_PART}]},
            },
            "required": ["type", "call_id"],
        },
        {
            "type": "object",
            "description": "Handed back from an earlier answer; dropped (a chat engine cannot take it).",
            "properties": {"type": {"const": "reasoning"}},
            "required": ["type"],
        },
    ]
}
FUNCTION_TOOL = {
    "type": "object",
    "properties": {
        "type": {"const": "function"},
        "name": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
        "parameters": {"type": "object"},
        "strict": {"type": "boolean"},
    },
    "required": ["type", "name"],
}
REQUEST: dict[str, Any] = {
    "type": "object",
    "description": "OpenAI's Responses request as the gateway serves it. Stateless: `store: true`, "
    "`previous_response_id`, `conversation` and `background: true` are refused with a 400 naming the field.",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": INPUT_ITEM}]},
        "instructions": {"type": ["string", "null"]},
        "tools": {
            "type": "array",
            "description": "Function tools; `namespace` tools (function tools in a group); hosted tools "
            "(web_search, ...) are dropped and named in `x-tandem-dropped-tools`.",
            "items": {
                "oneOf": [
                    FUNCTION_TOOL,
                    {
                        "type": "object",
                        "properties": {
                            "type": {"const": "namespace"},
                            "name": {"type": "string"},
                            "tools": {"type": "array", "items": FUNCTION_TOOL},
                        },
                        "required": ["type", "name"],
                    },
                    {
                        "type": "object",
                        "properties": {"type": {"not": {"enum": ["function", "namespace"]}}},
                        "required": ["type"],
                    },
                ]
            },
        },
        "tool_choice": {
            "oneOf": [
                {"enum": ["auto", "none", "required"]},
                {
                    "type": "object",
                    "properties": {"type": {"const": "function"}, "name": {"type": "string"}},
                    "required": ["type", "name"],
                },
            ]
        },
        "parallel_tool_calls": {"type": "boolean"},
        "max_output_tokens": {"type": ["integer", "null"], "minimum": 1},
        "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
        "top_p": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "reasoning": {"type": ["object", "null"]},
        "include": {"type": ["array", "null"], "items": {"type": "string"}},
        "prompt_cache_key": {"type": ["string", "null"]},
        "metadata": {"type": ["object", "null"]},
        "text": {"type": ["object", "null"]},
        "stream": {"type": "boolean"},
        "store": {"type": "boolean", "enum": [False]},
    },
    "required": ["model", "input"],
}
STRING = {"type": "string"}


def _item(kind: str, required: tuple[str, ...], **properties: Any) -> dict[str, Any]:
    """An output item's schema: its `type`, an `id`, and what else it carries."""
    return {
        "type": "object",
        "properties": {"type": {"const": kind}, "id": STRING, **properties},
        "required": ["type", "id", *required],
    }


TEXT_OUT = {
    "type": "object",
    "properties": {"type": {"const": "output_text"}, "text": STRING},
    "required": ["type", "text"],
}
OUTPUT_ITEM = {
    "oneOf": [
        _item(
            "message",
            ("status", "role", "content"),
            status={"enum": ["in_progress", "completed", "incomplete"]},
            role={"const": "assistant"},
            content={"type": "array", "items": TEXT_OUT},
        ),
        _item(
            "function_call",
            ("call_id", "name", "arguments"),
            call_id=STRING,
            name=STRING,
            namespace=STRING,
            arguments=STRING,
            status={"enum": ["in_progress", "completed"]},
        ),
        _item("reasoning", ("summary",), summary={"type": "array"}),
    ]
}
USAGE = {
    "type": ["object", "null"],
    "properties": {
        "input_tokens": {"type": "integer", "minimum": 0},
        "output_tokens": {"type": "integer", "minimum": 0},
        "total_tokens": {"type": "integer", "minimum": 0},
        "input_tokens_details": {"type": "object"},
        "output_tokens_details": {"type": "object"},
    },
    "required": ["input_tokens", "output_tokens", "total_tokens"],
}
RESPONSE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^resp_"},
        "object": {"const": "response"},
        "created_at": {"type": "integer"},
        "status": {"enum": ["in_progress", "completed", "incomplete", "failed"]},
        "model": {"type": "string"},
        "output": {"type": "array", "items": {"$ref": REF + "ResponsesOutputItem"}},
        "usage": {"$ref": REF + "ResponsesUsage"},
        "error": {"type": ["object", "null"]},
        "incomplete_details": {"type": ["object", "null"]},
        "store": {"type": "boolean"},
    },
    "required": ["id", "object", "created_at", "status", "model", "output"],
}
EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
]
EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event's data (`event:` names the same type). Events that carry the "
    "whole response (created, in_progress, completed, incomplete, failed) hold it in `response`.",
    "properties": {
        "type": {"enum": EVENTS},
        "sequence_number": {"type": "integer", "minimum": 0},
        "response": {"$ref": REF + "ResponsesResponse"},
        "item": {"$ref": REF + "ResponsesOutputItem"},
        "output_index": {"type": "integer", "minimum": 0},
        "item_id": {"type": "string"},
        "delta": {"type": "string"},
    },
    "required": ["type", "sequence_number"],
}
OPENAI_ERROR = {
    "type": "object",
    "description": "OpenAI's error body, as every /v1/ endpoint but /v1/messages answers.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string", "minLength": 1},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
            "required": ["message", "type", "param", "code"],
        }
    },
    "required": ["error"],
}
COMPONENTS = {
    "ResponsesRequest": REQUEST,
    "ResponsesResponse": RESPONSE,
    "ResponsesOutputItem": OUTPUT_ITEM,
    "ResponsesUsage": USAGE,
    "ResponsesStreamEvent": EVENT,
    "GatewayError": OPENAI_ERROR,
}
ERRORS = {
    "400": "The request is invalid; `error.param` names the field.",
    "401": "No valid inference key.",
    "403": "The key lacks the `inference` scope or may not call this model.",
    "404": "No such model for this key.",
    "413": "The body is over the gateway's limit.",
    "429": "A key limit or quota; `Retry-After` says when to retry.",
    "502": "The gateway could not relay the upstream's answer.",
    "503": "Neither the cluster nor its fallback can serve it.",
}


def sse_events(payload: str, note: str) -> dict[str, Any]:
    """A ``text/event-stream`` answer's schema: each event as an SSE client reads it (its ``event`` and
    ``data`` fields; what OpenAPI 3.2's ``itemSchema`` describes and schemathesis validates), its ``data``
    the component `payload` as JSON. OpenAPI 3.0 has no keyword for a string's JSON content, so
    ``x-data-schema`` names the component."""
    return {
        "type": "object",
        "description": f"One server-sent event: `data` is a {payload} as JSON{note}.",
        "properties": {
            "event": {"type": "string"},
            "data": {"type": "string"},
            "id": {"type": "string"},
            "retry": {"type": "integer", "minimum": 0},
        },
        "required": ["data"],
        "x-data-schema": REF + payload,
    }


def responses_operation() -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": REF + "GatewayError"}}}
    return {
        "operationId": "responses_create",
        "summary": "Create a model response (OpenAI Responses API), streamed or not",
        "tags": ["gateway"],
        "security": [{"inferenceKey": []}],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": REF + "ResponsesRequest"}}},
        },
        "responses": {
            "200": {
                "description": "The response (`stream: false`), or its events (`stream: true`). Headers: "
                "`x-tandem-backend`, `x-tandem-topology`, `x-tandem-responses` (passthrough or "
                "translated), `x-tandem-dropped-tools` when hosted tools were dropped.",
                "content": {
                    "application/json": {"schema": {"$ref": REF + "ResponsesResponse"}},
                    "text/event-stream": {
                        "schema": sse_events("ResponsesStreamEvent", "; `event` names its type")
                    },
                },
            },
            **{status: {"description": text, "content": error} for status, text in ERRORS.items()},
        },
    }


def openapi30(node: Any) -> Any:
    """The JSON Schema above in OpenAPI 3.0's dialect: `const` as a one-value enum, a null type as
    `nullable`."""
    if isinstance(node, list):
        return [openapi30(value) for value in node]
    if not isinstance(node, dict):
        return node
    out = {key: openapi30(value) for key, value in node.items() if key != "const"}
    if "const" in node:
        out["enum"] = [node["const"]]
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        out["type"] = others[0]
        if "null" in kind:
            out["nullable"] = True
    return out


def responses_path(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular post-processing hook: add ``POST /v1/responses`` and its components."""
    result.setdefault("paths", {})["/v1/responses"] = {"post": responses_operation()}
    components = result.setdefault("components", {})
    components.setdefault("schemas", {}).update(openapi30(COMPONENTS))
    components.setdefault("securitySchemes", {})["inferenceKey"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An inference key, tdm_i_...",
    }
    return result
