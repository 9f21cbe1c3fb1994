"""Response objects and their output items, written from a chat-completions answer (pure)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from gateway.responses.request import NAMESPACE_JOIN

ECHOED = ("instructions", "max_output_tokens", "metadata", "prompt_cache_key", "temperature", "top_p", "user")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def usage(prompt_tokens: int, completion_tokens: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_usage(raw: Any) -> dict[str, Any] | None:
    """A chat answer's usage in the Responses form (None when it has none)."""
    if not isinstance(raw, dict):
        return None
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return usage(
        int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0), cached, reasoning
    )


class Shell:
    """The Response object around the output: the request's settings echoed, the status and usage."""

    def __init__(self, request: dict[str, Any], model: str) -> None:
        self.id = new_id("resp")
        self.created_at = int(time.time())
        self.request = request
        self.model = model

    def body(
        self,
        *,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
        incomplete: str | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        request = self.request
        found = request.get("reasoning")
        reasoning: dict[str, Any] = found if isinstance(found, dict) else {}
        text = request.get("text") if isinstance(request.get("text"), dict) else {"format": {"type": "text"}}
        tools = request.get("tools") if isinstance(request.get("tools"), list) else []
        body: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": request.get("parallel_tool_calls", True) is not False,
            "previous_response_id": None,
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "store": False,
            "text": text,
            "tool_choice": request.get("tool_choice") or "auto",
            "tools": tools,
            "truncation": "disabled",
            "usage": usage,
        }
        for name in ECHOED:
            body[name] = request.get(name)
        if body["temperature"] is None:
            body["temperature"] = 1.0
        if body["top_p"] is None:
            body["top_p"] = 1.0
        return body


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content if status == "completed" else [],
    }


def call_item(
    item_id: str,
    call_id: str,
    flat_name: str,
    arguments: str,
    namespaces: dict[str, tuple[str, str]],
    status: str,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": flat_name,
        "arguments": arguments,
        "status": status,
    }
    if flat_name in namespaces:
        item["namespace"], item["name"] = namespaces[flat_name]
    elif NAMESPACE_JOIN in flat_name and flat_name.split(NAMESPACE_JOIN, 1)[0] in {
        space for space, _ in namespaces.values()
    }:
        item["namespace"], item["name"] = flat_name.split(NAMESPACE_JOIN, 1)
    return item


def reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": text}] if text else []
    return {"type": "reasoning", "id": item_id, "summary": summary}


INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def from_chat(answer: dict[str, Any], shell: Shell, namespaces: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """A whole chat answer as a Response object."""
    choices = answer.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    thought = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(thought, str) and thought:
        output.append(reasoning_item(new_id("rs"), thought))
    if isinstance(message.get("content"), str) and message["content"]:
        output.append(message_item(new_id("msg"), message["content"]))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        output.append(
            call_item(
                new_id("fc"),
                str(call.get("id") or new_id("call")),
                str(function.get("name", "")),
                arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
                namespaces,
                "completed",
            )
        )
    incomplete = INCOMPLETE.get(str(choice.get("finish_reason")))
    return shell.body(
        status="incomplete" if incomplete else "completed",
        output=output,
        usage=chat_usage(answer.get("usage")),
        incomplete=incomplete,
    )
