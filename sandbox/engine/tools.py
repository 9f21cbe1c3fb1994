"""Tool calls of the simulated engine: which tool it calls, when, and with which arguments (pure).

The rule, the same on every API (chat, Messages, Responses):

- ``tool_choice`` ``none`` (or no tools): never a call.
- ``required`` (Anthropic ``any``) or a named function (Anthropic ``tool``): always a call, of the named
  tool or of the first one offered.
- ``auto`` (the default when tools are offered): a call of the first tool when the conversation's last
  message is not a tool result; once a tool result came back, an answer in text. So an agent loop calls
  once, reads the result, and answers.

What the engine was started with decides first, as in vLLM 0.32: on chat and Messages, ``required`` and
named choices need ``--tool-call-parser`` and ``auto`` (so any request with tools but no ``tool_choice``)
also ``--enable-auto-tool-choice``, or the request is refused (``tool_choice_problem``); the Responses
API refuses none of them and, without a parser, ignores the tools.

Arguments satisfy the tool's JSON schema: every required property is filled by its type (its ``const``,
``default`` or first ``enum`` value when it has one), nested objects likewise; optional properties are left
out. vLLM 0.32 itself enforces the argument schema only for tools marked ``strict: true`` (or with
``--tool-strict-level parameter``); a real model fills the rest with what it likes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sandbox.engine.tokens import CHUNK

NAMED = "function"  # tool_choice naming one function: ToolChoice.mode


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolChoice:
    mode: str  # "none" | "auto" | "required" | NAMED
    name: str | None = None


NO_TOOLS = ToolChoice("none")


@dataclass(frozen=True)
class PlannedCall:
    name: str
    arguments: str  # a JSON object, as the APIs carry it
    named: bool  # tool_choice named the function: chat's finish reason is then "stop", not "tool_calls"

    def pieces(self) -> list[str]:
        """The arguments as the tokens that stream them."""
        return [self.arguments[i : i + CHUNK] for i in range(0, len(self.arguments), CHUNK)]

    def tokens(self) -> int:
        """Output tokens of the call: its arguments and the end-of-sequence token."""
        return len(self.pieces()) + 1


def value_for(schema: Any) -> Any:
    """A value that satisfies ``schema`` (the JSON Schema subset tools use)."""
    if not isinstance(schema, dict):
        return None
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return value_for(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        return arguments_for(schema)
    if kind == "array":
        least = schema.get("minItems", 0)
        return [value_for(schema.get("items", {})) for _ in range(least if isinstance(least, int) else 0)]
    return {"string": "example", "integer": 1, "number": 1.0, "boolean": True}.get(str(kind))


def arguments_for(parameters: dict[str, Any]) -> dict[str, Any]:
    """An object with every required property of ``parameters`` filled by its type."""
    properties = parameters.get("properties")
    required = parameters.get("required")
    if not isinstance(properties, dict) or not isinstance(required, list):
        return {}
    return {name: value_for(properties.get(name, {})) for name in required if isinstance(name, str)}


def plan_call(
    tools: tuple[Tool, ...], choice: ToolChoice, *, after_tool_result: bool, auto_enabled: bool
) -> PlannedCall | None:
    """The call the model makes, or None for an answer in text."""
    if not tools or choice.mode == "none":
        return None
    if choice.mode == "auto" and (after_tool_result or not auto_enabled):
        return None
    tool = tools[0]
    if choice.mode == NAMED:
        tool = next((t for t in tools if t.name == choice.name), tool)
    arguments = json.dumps(arguments_for(tool.parameters))
    return PlannedCall(tool.name, arguments, named=choice.mode == NAMED)


def tool_choice_problem(choice: ToolChoice, *, parser: bool, auto_enabled: bool) -> str | None:
    """vLLM 0.32's refusal of a tool choice the server was not started for (a 400), or None."""
    if choice.mode == "none":
        return None
    if choice.mode == "auto":
        if auto_enabled and parser:
            return None
        return '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    if parser:
        return None
    described = f'function "{choice.name}"' if choice.mode == NAMED else f'"{choice.mode}"'
    return f"tool_choice={described} requires --tool-call-parser to be set"


# --- what each API sends -------------------------------------------------------------------------------
def _tool(name: Any, parameters: Any) -> Tool | None:
    if not isinstance(name, str) or not name:
        return None
    return Tool(name, parameters if isinstance(parameters, dict) else {})


def _named_choice(value: Any, name: Any) -> ToolChoice:
    return ToolChoice(NAMED, name if isinstance(name, str) else None) if value else ToolChoice("none")


def chat_tools(body: dict[str, Any]) -> tuple[tuple[Tool, ...], ToolChoice, bool]:
    """Tools, tool choice and whether a tool result came last, of a chat completion request."""
    tools = []
    for entry in body.get("tools") or []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and (tool := _tool(function.get("name"), function.get("parameters"))):
            tools.append(tool)
    raw = body.get("tool_choice")
    if isinstance(raw, dict):
        function = raw.get("function")
        choice = _named_choice(True, function.get("name") if isinstance(function, dict) else None)
    elif raw in ("none", "auto", "required"):
        choice = ToolChoice(str(raw))
    else:
        choice = ToolChoice("auto" if tools else "none")  # vLLM's default when tools are given
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    return tuple(tools), choice, last.get("role") == "tool"


def messages_tools(body: dict[str, Any]) -> tuple[tuple[Tool, ...], ToolChoice, bool]:
    """The same for an Anthropic Messages request (vLLM maps ``any`` to required, ``tool`` to named, and
    no choice to ``auto``)."""
    tools = [
        tool
        for entry in body.get("tools") or []
        if isinstance(entry, dict) and (tool := _tool(entry.get("name"), entry.get("input_schema")))
    ]
    raw = body.get("tool_choice")
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "tool":
        choice = _named_choice(True, raw.get("name") if isinstance(raw, dict) else None)
    else:
        choice = ToolChoice({"any": "required", "none": "none"}.get(str(kind), "auto"))
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    after = any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
    return tuple(tools), choice if tools else NO_TOOLS, after


def responses_tools(body: dict[str, Any]) -> tuple[tuple[Tool, ...], ToolChoice, bool]:
    """The same for a Responses request (function tools; ``function_call_output`` items are results)."""
    tools = [
        tool
        for entry in body.get("tools") or []
        if isinstance(entry, dict) and entry.get("type") == "function"
        if (tool := _tool(entry.get("name"), entry.get("parameters")))
    ]
    raw = body.get("tool_choice", "auto")
    if isinstance(raw, dict):
        choice = _named_choice(raw.get("type") == "function", raw.get("name"))
    else:
        choice = ToolChoice(raw if raw in ("none", "auto", "required") else "auto")
    items = body.get("input")
    last = items[-1] if isinstance(items, list) and items and isinstance(items[-1], dict) else {}
    return (
        tuple(tools),
        choice if tools else NO_TOOLS,
        last.get("type") == "function_call_output",
    )


# --- what vLLM 0.32 refuses in a request's tools (its words; the message ends "(parameter=...)") -------
EMPTY_TOOLS = (
    "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."
)
CHOICES = 'Only named tools, "none", "auto" or "required" are supported.'
UNKNOWN_TOOL = "The tool specified in `tool_choice` does not match any of the specified `tools`"


def chat_tools_problem(body: dict[str, Any]) -> tuple[str, str] | None:
    """(message, parameter) of a chat request's tools or tool_choice vLLM refuses, or None."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools == []:
        return EMPTY_TOOLS, "tools"
    if choice is None or choice == "none":
        return None
    if not tools:
        return "When using `tool_choice`, `tools` must be set.", "tool_choice"
    if not isinstance(choice, dict):
        if choice in ("auto", "required"):
            return None
        return f"Invalid value for `tool_choice`: {choice}! {CHOICES}", "tool_choice"
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if name not in {tool.name for tool in chat_tools(body)[0]}:
        return UNKNOWN_TOOL, "tool_choice"
    return None


def responses_tools_problem(body: dict[str, Any]) -> tuple[str, str] | None:
    """The same for a Responses request."""
    choice, tools = body.get("tool_choice", "auto"), body.get("tools") or []
    named = isinstance(choice, dict) and choice.get("type") in ("function", "custom")
    if not tools and choice == "required":
        return "Tool choice 'required' must be specified with 'tools' parameter.", "tool_choice"
    offered = {t.get("name") for t in tools if isinstance(t, dict)}
    if named and (not tools or choice.get("name") not in offered):
        return "Tool choice 'function' not found in 'tools' parameter.", "tool_choice"
    return None
