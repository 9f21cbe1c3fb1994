"""A Responses request checked, and written as a chat-completions request (pure).

What the gateway decides on its own:

- It keeps no responses: ``store`` omitted or ``false`` is served statelessly (the answer says
  ``store: false``); ``store: true``, ``previous_response_id``, ``conversation`` and ``background: true``
  are refused with a 400 naming the field. Codex sends ``store: false`` and the whole conversation on
  every turn, so it never needs them; a client that does gets told why instead of a silent amnesia.
- Hosted tools the cluster cannot run (``web_search``, ``file_search``, ``code_interpreter``, ...) are
  dropped, and named in the ``x-tandem-dropped-tools`` response header: Codex sends ``web_search`` on
  every turn, so refusing it would refuse every turn. Function tools inside a ``namespace`` (Codex's
  sub-agent tools) are offered to the model as ``<namespace>__<name>`` and answered with their namespace.
- Reasoning items handed back (``encrypted_content`` from an earlier answer) are dropped: a chat engine
  cannot take them, and the conversation's text carries what the model needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import GatewayError

NAMESPACE_JOIN = "__"
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "refusal")
EFFORTS = ("minimal", "low", "medium", "high")


@dataclass
class Prepared:
    """What the translation needs besides the chat request: echoes for the answer, names to map back."""

    chat: dict[str, Any]
    dropped_tools: list[str] = field(default_factory=list)
    namespaces: dict[str, tuple[str, str]] = field(default_factory=dict)  # flat name -> (namespace, name)


def _bad(message: str, param: str) -> GatewayError:
    return GatewayError(400, "invalid_request", message, param=param)


def check_policy(request: dict[str, Any]) -> None:
    """Refuse what the gateway does not serve, naming the field (the same on both paths)."""
    if request.get("store") is True:
        raise _bad(
            "`store: true` is not served: this gateway keeps no responses. Send `store: false` "
            "and the whole conversation in `input` (as Codex does).",
            "store",
        )
    for name in ("previous_response_id", "conversation"):
        if request.get(name) not in (None, ""):
            raise _bad(
                f"`{name}` is not served: this gateway keeps no responses. Send the earlier turns "
                "in `input` instead.",
                name,
            )
    if request.get("background") is True:
        raise _bad("`background: true` is not served; leave it out and stream instead.", "background")
    stream = request.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _bad("`stream` must be true or false.", "stream")


def _text(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"`{param}` must be a string or a list of content parts.", param)
    texts = []
    for index, part in enumerate(content):
        if not isinstance(part, dict):
            raise _bad(f"`{param}[{index}]` must be an object with a `type`.", f"{param}[{index}]")
        if part.get("type") in TEXT_PARTS:
            texts.append(str(part.get("text", "")))
    return "".join(texts)


def _content(content: Any, param: str) -> Any:
    """A message's content for chat: a string, or parts when it holds images."""
    if isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "input_image" for p in content
    ):
        parts: list[dict[str, Any]] = []
        for index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in TEXT_PARTS:
                parts.append({"type": "text", "text": str(part.get("text", ""))})
            elif kind == "input_image":
                url = part.get("image_url")
                if not isinstance(url, str) or not url:
                    raise _bad("An `input_image` part needs an `image_url`.", f"{param}[{index}].image_url")
                parts.append({"type": "image_url", "image_url": {"url": url}})
        return parts
    return _text(content, param)


def _calls_message(chat: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message the next tool call joins (consecutive calls are one chat message)."""
    if chat and chat[-1]["role"] == "assistant" and "tool_calls" in chat[-1]:
        return chat[-1]
    if chat and chat[-1]["role"] == "assistant" and not chat[-1].get("tool_calls"):
        chat[-1]["tool_calls"] = []
        return chat[-1]
    message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": []}
    chat.append(message)
    return message


def _flat_name(item: dict[str, Any]) -> str:
    name = str(item.get("name", ""))
    namespace = item.get("namespace")
    return f"{namespace}{NAMESPACE_JOIN}{name}" if isinstance(namespace, str) and namespace else name


def _item(item: Any, index: int, chat: list[dict[str, Any]]) -> None:
    param = f"input[{index}]"
    if not isinstance(item, dict):
        raise _bad(f"`{param}` must be an object.", param)
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = ROLES.get(str(item.get("role")))
        if role is None:
            raise _bad(
                f"`{param}.role` must be system, developer, user or assistant; got {item.get('role')!r}.",
                f"{param}.role",
            )
        content = _content(item.get("content"), f"{param}.content")
        if role == "assistant" and chat and chat[-1]["role"] == "assistant" and chat[-1].get("tool_calls"):
            chat.append({"role": "assistant", "content": content})
        else:
            chat.append({"role": role, "content": content})
    elif kind == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise _bad(f"A `function_call` item needs `call_id` and `name` ({param}).", param)
        arguments = item.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        _calls_message(chat)["tool_calls"].append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": _flat_name(item), "arguments": arguments},
            }
        )
    elif kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _bad(f"A `function_call_output` item needs `call_id` ({param}).", f"{param}.call_id")
        output = item.get("output", "")
        text = output if isinstance(output, str) else _text(output, f"{param}.output")
        chat.append({"role": "tool", "tool_call_id": call_id, "content": text})
    elif kind == "reasoning":
        return  # handed back from an earlier answer; a chat engine cannot take it
    else:
        raise _bad(
            f"`{param}.type` {kind!r} is not served: input items may be message, function_call, "
            "function_call_output or reasoning.",
            f"{param}.type",
        )


def _function(tool: dict[str, Any], name: str, param: str) -> dict[str, Any]:
    if not name:
        raise _bad(f"A function tool needs a `name` ({param}).", f"{param}.name")
    function: dict[str, Any] = {"name": name, "parameters": tool.get("parameters") or {"type": "object"}}
    if tool.get("description"):
        function["description"] = str(tool["description"])
    if isinstance(tool.get("strict"), bool):
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def _tools(tools: Any, prepared: Prepared) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _bad("`tools` must be a list.", "tools")
    out = []
    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _bad(f"`{param}` must be an object with a `type`.", param)
        if tool["type"] == "function":
            out.append(_function(tool, str(tool.get("name") or ""), param))
        elif tool["type"] == "namespace":
            space = str(tool.get("name") or "")
            for inner, member in enumerate(tool.get("tools") or []):
                if isinstance(member, dict) and member.get("type") == "function":
                    name = str(member.get("name") or "")
                    flat = f"{space}{NAMESPACE_JOIN}{name}"
                    prepared.namespaces[flat] = (space, name)
                    out.append(_function(member, flat, f"{param}.tools[{inner}]"))
        else:
            prepared.dropped_tools.append(tool["type"])
    return out


def _tool_choice(choice: Any) -> Any:
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return {"type": "function", "function": {"name": str(choice["name"])}}
    raise _bad("`tool_choice` must be auto, none, required or {type: function, name}.", "tool_choice")


def _number(request: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = request.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _bad(f"`{name}` must be a number from {low:g} to {high:g}.", name)
    return float(value)


def _format(text: Any) -> dict[str, Any] | None:
    if text is None:
        return None
    if not isinstance(text, dict):
        raise _bad("`text` must be an object such as {format: {type: text}}.", "text")
    shape = text.get("format")
    if not isinstance(shape, dict) or shape.get("type") in (None, "text"):
        return None
    if shape["type"] == "json_object":
        return {"type": "json_object"}
    if shape["type"] == "json_schema":
        schema = {k: shape[k] for k in ("name", "schema", "strict", "description") if k in shape}
        return {"type": "json_schema", "json_schema": schema}
    raise _bad("`text.format.type` must be text, json_object or json_schema.", "text.format.type")


def check(request: dict[str, Any]) -> None:
    """The fields both paths rely on, checked with errors that name them."""
    check_policy(request)
    limit = request.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise _bad("`max_output_tokens` must be a positive integer.", "max_output_tokens")
    _number(request, "temperature", 0, 2)
    _number(request, "top_p", 0, 1)
    for name in ("reasoning", "metadata"):
        if request.get(name) is not None and not isinstance(request[name], dict):
            raise _bad(f"`{name}` must be an object.", name)
    include = request.get("include")
    if include is not None and not (isinstance(include, list) and all(isinstance(i, str) for i in include)):
        raise _bad("`include` must be a list of strings.", "include")
    if "input" not in request or not isinstance(request["input"], str | list):
        raise _bad("`input` must be a string or a list of input items.", "input")


def to_chat(request: dict[str, Any]) -> Prepared:
    """A checked Responses request as chat completions (``check`` first)."""
    check(request)
    prepared = Prepared(chat={})
    chat: list[dict[str, Any]] = []
    instructions = request.get("instructions")
    if isinstance(instructions, str) and instructions:
        chat.append({"role": "system", "content": instructions})
    raw = request["input"]
    if isinstance(raw, str):
        chat.append({"role": "user", "content": raw})
    else:
        for index, item in enumerate(raw):
            _item(item, index, chat)
    if not chat:
        raise _bad("`input` holds no message to answer.", "input")
    body: dict[str, Any] = {"model": request["model"], "messages": chat}
    tools = _tools(request.get("tools"), prepared)
    if tools:
        body["tools"] = tools
        choice = _tool_choice(request.get("tool_choice"))
        if choice is not None:
            body["tool_choice"] = choice
        if isinstance(request.get("parallel_tool_calls"), bool):
            body["parallel_tool_calls"] = request["parallel_tool_calls"]
    if request.get("max_output_tokens") is not None:
        body["max_tokens"] = request["max_output_tokens"]
    for name in ("temperature", "top_p"):
        if request.get(name) is not None:
            body[name] = request[name]
    effort = (request.get("reasoning") or {}).get("effort")
    if effort in EFFORTS:
        body["reasoning_effort"] = effort
    response_format = _format(request.get("text"))
    if response_format is not None:
        body["response_format"] = response_format
    if request.get("stream"):
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    prepared.chat = body
    return prepared


def for_passthrough(request: dict[str, Any]) -> tuple[dict[str, Any], list[str]] | None:
    """The request as the engine's own /v1/responses gets it, hosted tools dropped (it cannot run them);
    None when it needs the translation (namespaced tools, which engines do not take). The request was
    checked already (``to_chat``, which every request goes through first)."""
    tools = request.get("tools")
    if not isinstance(tools, list):
        return request, []
    if any(isinstance(t, dict) and t.get("type") == "namespace" for t in tools):
        return None
    kept = [t for t in tools if isinstance(t, dict) and t.get("type") == "function"]
    dropped = [str(t.get("type")) if isinstance(t, dict) else "?" for t in tools if t not in kept]
    return ({**request, "tools": kept} if dropped else request), dropped
