"""The gateway's other endpoints in the OpenAPI document: chat completions, completions, models, and
Anthropic's Messages with its token count, as the gateway serves them.

Chat completions and completions are the engine's own answers passed through byte for byte, so their
schemas hold what the gateway relies on and what OpenAI's SDKs read, and leave room for the fields each
engine adds (vLLM writes ``kv_transfer_params``, ``prompt_token_ids``, ...). An engine's own error is
passed through as it came: its ``code`` may be a number (vLLM writes 400) where the gateway's own errors
write a string. Messages and the token count are the gateway's own translation, described exactly.
``gateway/tests/test_v1_schema.py`` holds served answers, streamed events and errors, and the real
vLLM's recorded answers, to these schemas.
"""

from __future__ import annotations

from typing import Any

from gateway.openapi import ERRORS, REF, openapi30, sse_events

STRING = {"type": "string"}
COUNT = {"type": "integer", "minimum": 0}
NULLABLE_STRING = {"type": ["string", "null"]}

CHAT_REQUEST: dict[str, Any] = {
    "type": "object",
    "description": "OpenAI's chat-completions request; fields beyond these go to the engine as sent.",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {"role": {"enum": ["system", "developer", "user", "assistant", "tool"]}},
                "required": ["role"],
            },
        },
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "max_tokens": {"type": "integer", "minimum": 1},
        "max_completion_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "tools": {"type": "array", "items": {"type": "object"}},
        "tool_choice": {"oneOf": [{"type": "string"}, {"type": "object"}]},
    },
    "required": ["model", "messages"],
}
COMPLETION_REQUEST: dict[str, Any] = {
    "type": "object",
    "description": "OpenAI's (legacy) completions request; fields beyond these go to the engine as sent.",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "prompt": {"oneOf": [{"type": "string"}, {"type": "array"}]},
        "stream": {"type": "boolean"},
        "max_tokens": {"type": "integer", "minimum": 1},
    },
    "required": ["model", "prompt"],
}
USAGE: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "Counted by the engine; `prompt_tokens_details.cached_tokens` where it reports them.",
    "properties": {
        "prompt_tokens": COUNT,
        "completion_tokens": COUNT,
        "total_tokens": COUNT,
        "prompt_tokens_details": {"type": ["object", "null"]},
    },
    "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
}
TOOL_CALL = {
    "type": "object",
    "properties": {
        "id": STRING,
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "properties": {"name": STRING, "arguments": STRING},
            "required": ["name", "arguments"],
        },
    },
    "required": ["id", "function"],
}


def _choices_answer(
    kind: str, choice: dict[str, Any], required: list[str], description: str = ""
) -> dict[str, Any]:
    """OpenAI's answer shape (chat, chunk, completion): the envelope is one; a choice differs."""
    found: dict[str, Any] = {
        "type": "object",
        "properties": {
            "id": STRING,
            "object": {"const": kind},
            "created": {"type": "integer"},
            "model": STRING,
            "choices": {
                "type": "array",
                "items": {"type": "object", "properties": choice, "required": required},
            },
            "usage": {"$ref": REF + "ChatUsage"},
        },
        "required": ["id", "object", "created", "model", "choices"],
    }
    if description:
        found["description"] = description
    return found


CHAT_ANSWER = _choices_answer(
    "chat.completion",
    {
        "index": COUNT,
        "message": {
            "type": "object",
            "properties": {
                "role": {"const": "assistant"},
                "content": NULLABLE_STRING,
                "tool_calls": {"type": ["array", "null"], "items": TOOL_CALL},
            },
            "required": ["role"],
        },
        "finish_reason": NULLABLE_STRING,
    },
    ["index", "message", "finish_reason"],
)
CHAT_CHUNK = _choices_answer(
    "chat.completion.chunk",
    {"index": COUNT, "delta": {"type": "object"}, "finish_reason": NULLABLE_STRING},
    ["index", "delta"],
    "One streamed event's data; the stream ends with `data: [DONE]`. The last chunk before it carries "
    "`usage` and no choices when the request asked for it (`stream_options`).",
)
COMPLETION_ANSWER = _choices_answer(
    "text_completion",
    {"index": COUNT, "text": STRING, "finish_reason": NULLABLE_STRING},
    ["index", "text"],
    "A completion, or (`stream: true`) one streamed event's data, ending with `[DONE]`.",
)
MODEL_LIST: dict[str, Any] = {
    "type": "object",
    "description": "The model names this key may call: each topology's model and its aliases.",
    "properties": {
        "object": {"const": "list"},
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": STRING,
                    "object": {"const": "model"},
                    "created": {"type": "integer"},
                    "owned_by": {"type": "string", "pattern": "^tandem:"},
                },
                "required": ["id", "object", "created", "owned_by"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["object", "data"],
    "additionalProperties": False,
}
ENGINE_ERROR: dict[str, Any] = {
    "type": "object",
    "description": "An error: the gateway's own (`code` a string) or the engine's, passed through as it "
    "came (vLLM writes its HTTP status as `code`).",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string", "minLength": 1},
                "type": STRING,
                "param": NULLABLE_STRING,
                "code": {"description": "A string (the gateway's), a number (vLLM's status) or null."},
            },
            "required": ["message", "type"],
        }
    },
    "required": ["error"],
}
BLOCK: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"type": {"const": "text"}, "text": STRING},
            "required": ["type", "text"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"type": {"const": "thinking"}, "thinking": STRING, "signature": STRING},
            "required": ["type", "thinking", "signature"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "tool_use"},
                "id": STRING,
                "name": STRING,
                "input": {"type": "object"},
            },
            "required": ["type", "id", "name", "input"],
            "additionalProperties": False,
        },
    ]
}
MESSAGES_USAGE: dict[str, Any] = {
    "type": "object",
    "properties": {"input_tokens": COUNT, "output_tokens": COUNT},
    "required": ["input_tokens", "output_tokens"],
    "additionalProperties": False,
}
STOP_REASON = {
    "type": ["string", "null"],
    "enum": ["end_turn", "max_tokens", "stop_sequence", "tool_use", None],
}
MESSAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": STRING,
        "type": {"const": "message"},
        "role": {"const": "assistant"},
        "model": STRING,
        "content": {"type": "array", "items": {"$ref": REF + "MessagesContentBlock"}},
        "stop_reason": STOP_REASON,
        "stop_sequence": NULLABLE_STRING,
        "usage": {"$ref": REF + "MessagesUsage"},
    },
    "required": ["id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"],
    "additionalProperties": False,
}
MESSAGES_REQUEST: dict[str, Any] = {
    "type": "object",
    "description": "Anthropic's Messages request as Claude Code sends it: system messages inside "
    "`messages` too, system blocks with `cache_control`, thinking blocks, tool use and results.",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "messages": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "role": {"enum": ["user", "assistant", "system"]},
                    "content": {
                        "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]
                    },
                },
                "required": ["role", "content"],
            },
        },
        "system": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
        "stream": {"type": "boolean"},
        "tools": {"type": "array", "items": {"type": "object"}},
        "tool_choice": {"type": "object"},
        "thinking": {"type": "object"},
        "temperature": {"type": "number"},
        "metadata": {"type": "object"},
    },
    "required": ["model", "max_tokens", "messages"],
}
COUNT_REQUEST: dict[str, Any] = {
    **MESSAGES_REQUEST,
    "description": "A Messages request to count (`max_tokens` may be left out).",
    "required": ["model", "messages"],
}
COUNT_ANSWER: dict[str, Any] = {
    "type": "object",
    "description": "The prompt's tokens: the engine's own count (`/tokenize`) where it has one, else an "
    "estimate marked `estimated: true` (the `x-tandem-token-count` header says which).",
    "properties": {"input_tokens": COUNT, "estimated": {"const": True}},
    "required": ["input_tokens"],
    "additionalProperties": False,
}
MESSAGES_EVENTS = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
]
MESSAGES_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event's data (`event:` names the same type).",
    "properties": {
        "type": {"enum": MESSAGES_EVENTS},
        "message": {"$ref": REF + "MessagesResponse"},
        "index": COUNT,
        "content_block": {"$ref": REF + "MessagesContentBlock"},
        "delta": {"type": "object"},
        "usage": {"$ref": REF + "MessagesUsage"},
        "error": {"type": "object"},
    },
    "required": ["type"],
}
ANTHROPIC_ERROR: dict[str, Any] = {
    "type": "object",
    "description": "Anthropic's error body, as /v1/messages answers (the wording Claude Code's own "
    "fallbacks recognise).",
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "properties": {"type": STRING, "message": {"type": "string", "minLength": 1}},
            "required": ["type", "message"],
        },
    },
    "required": ["type", "error"],
}
COMPONENTS: dict[str, Any] = {
    "ChatCompletionRequest": CHAT_REQUEST,
    "ChatCompletion": CHAT_ANSWER,
    "ChatCompletionChunk": CHAT_CHUNK,
    "ChatUsage": USAGE,
    "CompletionRequest": COMPLETION_REQUEST,
    "Completion": COMPLETION_ANSWER,
    "ModelList": MODEL_LIST,
    "EngineError": ENGINE_ERROR,
    "MessagesRequest": MESSAGES_REQUEST,
    "MessagesResponse": MESSAGE,
    "MessagesContentBlock": BLOCK,
    "MessagesUsage": MESSAGES_USAGE,
    "MessagesStreamEvent": MESSAGES_EVENT,
    "MessagesCountTokensRequest": COUNT_REQUEST,
    "MessagesCountTokens": COUNT_ANSWER,
    "AnthropicError": ANTHROPIC_ERROR,
}
HEADERS = "Headers: `x-tandem-backend` (cluster or fallback), `x-tandem-topology`."
SSE_NOTES = {
    "ChatCompletionChunk": "; the last event's `data` is `[DONE]`",
    "Completion": "; the last event's `data` is `[DONE]`",
    "MessagesStreamEvent": "; `event` names its type",
}


def _operation(
    operation_id: str,
    summary: str,
    request: str | None,
    answers: dict[str, str],
    error: str,
    description: str = HEADERS,
) -> dict[str, Any]:
    content = {
        media: {
            "schema": sse_events(name, SSE_NOTES[name])
            if media == "text/event-stream"
            else {"$ref": REF + name}
        }
        for media, name in answers.items()
    }
    failed = {"application/json": {"schema": {"$ref": REF + error}}}
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": summary,
        "tags": ["gateway"],
        "security": [{"inferenceKey": []}],
        "responses": {
            "200": {"description": description, "content": content},
            **{status: {"description": text, "content": failed} for status, text in ERRORS.items()},
        },
    }
    if request is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": REF + request}}},
        }
    return operation


def paths() -> dict[str, dict[str, Any]]:
    streamed = "`stream: true` answers server-sent events. " + HEADERS
    return {
        "/v1/chat/completions": {
            "post": _operation(
                "chat_completions_create",
                "Create a chat completion (OpenAI), streamed or not: the engine's answer, passed through",
                "ChatCompletionRequest",
                {"application/json": "ChatCompletion", "text/event-stream": "ChatCompletionChunk"},
                "EngineError",
                streamed,
            )
        },
        "/v1/completions": {
            "post": _operation(
                "completions_create",
                "Create a completion (OpenAI, legacy), streamed or not: the engine's answer, passed through",
                "CompletionRequest",
                {"application/json": "Completion", "text/event-stream": "Completion"},
                "EngineError",
                streamed,
            )
        },
        "/v1/models": {
            "get": _operation(
                "models_list",
                "The model names this key may call",
                None,
                {"application/json": "ModelList"},
                "GatewayError",
                "Each topology's model and its aliases.",
            )
        },
        "/v1/messages": {
            "post": _operation(
                "messages_create",
                "Create a message (Anthropic Messages), streamed or not, served by the cluster's model",
                "MessagesRequest",
                {"application/json": "MessagesResponse", "text/event-stream": "MessagesStreamEvent"},
                "AnthropicError",
                streamed,
            )
        },
        "/v1/messages/count_tokens": {
            "post": _operation(
                "messages_count_tokens",
                "Count a Messages request's input tokens (the engine's tokenizer, else an estimate)",
                "MessagesCountTokensRequest",
                {"application/json": "MessagesCountTokens"},
                "AnthropicError",
                "Header `x-tandem-token-count`: engine or estimate.",
            )
        },
    }


def v1_paths(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular post-processing hook (after ``gateway.openapi.responses_path``): the other
    gateway endpoints and their components."""
    from traces.openapi import paths as traces_paths

    result.setdefault("paths", {}).update(paths())
    result["paths"].update(traces_paths())
    result.setdefault("components", {}).setdefault("schemas", {}).update(openapi30(COMPONENTS))
    return result
