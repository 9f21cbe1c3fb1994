"""Anthropic's Messages API and OpenAI's Responses API as vLLM 0.32 serves them (``/v1/messages``,
``/v1/responses``): request parsing, bodies and event streams, shaped like the real engine's answers
(``telemetry/tests/data/vllm-0.32.0/`` holds them; ``realengine/tests/test_conformance.py`` holds the
simulated engine to them).

Both map onto the engine's chat generation: a request becomes a ``CompletionRequest`` with ``chat=True``
and its ``api``; what differs is how the answer is written.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from sandbox.engine.openai import CompletionRequest, RequestError, length_controls, public_id
from sandbox.engine.tokens import chat_prompt
from sandbox.engine.tools import messages_tools, responses_tools, responses_tools_problem

STOP_REASONS = {"length": "max_tokens", "stop": "end_turn", "tool_calls": "tool_use"}  # vLLM's -> Anthropic's
RESPONSE_TOOL_NULLS = ("allowed_callers", "async", "defer_loading", "description", "output_schema")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and "text" in part
        )
    return ""


def _model(body: dict[str, Any], served: tuple[str, ...]) -> str:
    model = body.get("model")
    if model is not None and model not in served:
        aliases = ", ".join(served)
        raise RequestError(
            404, f"The model `{model}` does not exist. Valid aliases: {aliases}.", "model", "NotFoundError"
        )
    return str(model or served[0])


def _positive(body: dict[str, Any], name: str, *, required: bool) -> int | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(400, f"{name}: Input should be a positive integer", name)
    return value


def parse_messages(body: Any, served: tuple[str, ...]) -> CompletionRequest:
    """An Anthropic Messages request (``max_tokens`` required, ``system`` a string or text blocks)."""
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    model = _model(body, served)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise RequestError(
            400, "messages: Field required (a non-empty list of {role, content} objects)", "messages"
        )
    turns = [{"role": m.get("role", "user"), "content": _text_of(m.get("content"))} for m in messages]
    system = _text_of(body.get("system"))
    if system:
        turns.insert(0, {"role": "system", "content": system})
    max_tokens = _positive(body, "max_tokens", required=True)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream: Input should be a valid boolean", "stream")
    offered, choice, after = messages_tools(body)
    return CompletionRequest(
        chat=True, model=model, prompt=chat_prompt(turns), max_tokens=max_tokens, stream=stream,
        include_usage=True, kv_transfer_params=None, api="messages", seed=None, tools=offered,
        tool_choice=choice, after_tool_result=after,
    )  # fmt: skip  # vLLM's Messages route drops ignore_eos and min_tokens (not in its request model)


def parse_responses(body: Any, served: tuple[str, ...]) -> CompletionRequest:
    """A Responses request: ``input`` a string or a list of message items; ``instructions``."""
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    model = _model(body, served)
    raw = body.get("input")
    if isinstance(raw, str):
        turns = [{"role": "user", "content": raw}]
    elif isinstance(raw, list) and raw and all(isinstance(item, dict) for item in raw):
        turns = [
            {
                "role": item.get("role", "user"),
                "content": _text_of(item.get("content", item.get("output", ""))),
            }
            for item in raw
        ]
    else:
        raise RequestError(400, "input: Field required (a string or a list of input items)", "input")
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        turns.insert(0, {"role": "system", "content": instructions})
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream: Input should be a valid boolean", "stream")
    max_tokens = _positive(body, "max_output_tokens", required=False)
    if problem := responses_tools_problem(body):
        raise RequestError(400, f"{problem[0]} (parameter={problem[1]})", problem[1])
    offered, choice, after = responses_tools(body)
    echoed = [{**tool, **{k: tool.get(k) for k in RESPONSE_TOOL_NULLS}} for tool in body.get("tools") or []]
    return CompletionRequest(
        chat=True, model=model, prompt=chat_prompt(turns), max_tokens=max_tokens, stream=stream,
        include_usage=True, kv_transfer_params=None, api="responses",
        instructions=instructions if isinstance(instructions, str) else None,
        **length_controls(body, max_tokens, min_tokens=False),
        tools=offered, tool_choice=choice, after_tool_result=after,
        echo={
            "tools": echoed, "tool_choice": body.get("tool_choice", "auto") if offered else "none",
            "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        },
    )  # fmt: skip  # vLLM's Responses route takes ignore_eos, not min_tokens


def anthropic_error(status: int, message: str, kind: str) -> dict[str, Any]:
    """vLLM's error body on ``/v1/messages``: Anthropic's envelope, vLLM's error type names."""
    return {"type": "error", "error": {"type": kind, "message": message}}


# --- Messages ------------------------------------------------------------------------------------------
def message_body(
    req: CompletionRequest, request_id: str, text: str, finish: str | None, usage: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": public_id(request_id),
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "model": req.model,
        "stop_reason": STOP_REASONS.get(finish or "", finish),
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]},
    }


def sse_event(name: str, body: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n".encode()


class MessageStream:
    """``message_start``, one text block of ``content_block_delta`` events, ``message_delta`` with the stop
    reason and usage, ``message_stop``: the events vLLM writes, in its order."""

    def __init__(self, req: CompletionRequest, request_id: str, prompt_tokens: int) -> None:
        self.req, self.id, self.prompt_tokens = req, public_id(request_id), prompt_tokens

    def opening(self) -> bytes:
        message: dict[str, Any] = {
            "id": self.id, "type": "message", "role": "assistant", "content": [], "model": self.req.model,
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 0},
        }  # fmt: skip
        return sse_event("message_start", {"type": "message_start", "message": message}) + sse_event(
            "content_block_start",
            {"type": "content_block_start", "content_block": self.block(), "index": 0},
        )

    def block(self) -> dict[str, Any]:
        return {"type": "text", "text": ""}

    def delta(self, text: str, finish: str | None) -> bytes:
        body = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": text}, "index": 0}
        return sse_event("content_block_delta", body)

    def closing(self, finish: str | None, usage: dict[str, Any]) -> bytes:
        counts = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
        stop = {"stop_reason": STOP_REASONS.get(finish or "", finish), "stop_sequence": None}
        return (
            sse_event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + sse_event("message_delta", {"type": "message_delta", "delta": stop, "usage": counts})
            + sse_event("message_stop", {"type": "message_stop"})
        )

    def error(self, status: int, message: str) -> bytes:
        return sse_event("error", anthropic_error(status, message, "InternalServerError"))


# --- Responses -----------------------------------------------------------------------------------------
def responses_usage(usage: dict[str, Any]) -> dict[str, Any]:
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {
            "cached_tokens": cached, "cache_write_tokens": 0, "input_tokens_per_turn": [],
            "cached_tokens_per_turn": [],
        },
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {
            "reasoning_tokens": 0, "tool_output_tokens": 0, "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        },
        "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
    }  # fmt: skip


class ResponseWriter:
    """The Responses API's body and its event stream (``response.created`` ... ``response.completed``,
    each event with its ``sequence_number``), one output message item, as vLLM writes them."""

    def __init__(self, req: CompletionRequest, request_id: str) -> None:
        self.req = req
        self.id = f"resp_{request_id.replace('-', '')[:16]}"
        self.item = f"msg_{secrets.token_hex(8)}"
        self.created = int(time.time())
        self.sequence = 0
        self.text = ""

    def _output(self, text: str, status: str) -> dict[str, Any]:
        part: dict[str, Any] = {"annotations": [], "text": text, "type": "output_text", "logprobs": None}
        return {"id": self.item, "content": [part] if status == "completed" else [], "role": "assistant",
                "status": status, "type": "message", "phase": None}  # fmt: skip

    def final_output(self, text: str) -> list[dict[str, Any]]:
        return [self._output(text, "completed")]

    def body(self, text: str, finish: str | None, usage: dict[str, Any] | None) -> dict[str, Any]:
        done = usage is not None
        incomplete = done and finish == "length"
        return {
            "id": self.id, "created_at": self.created,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": self.req.instructions, "metadata": None, "model": self.req.model,
            "object": "response",
            "output": self.final_output(text) if done else [], "parallel_tool_calls": True,
            "temperature": 1.0, **(self.req.echo or {"tool_choice": "none", "tools": []}), "top_p": 1.0,
            "background": False,
            "max_output_tokens": self.req.max_tokens, "max_tool_calls": None, "previous_response_id": None,
            "prompt": None, "reasoning": None, "service_tier": "auto",
            "status": ("incomplete" if incomplete else "completed") if done else "in_progress", "text": None,
            "top_logprobs": None, "truncation": "disabled",
            "usage": responses_usage(usage) if usage else None, "user": None, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "kv_transfer_params": None, "ec_transfer_params": None,
            "input_messages": None, "output_messages": None,
        }  # fmt: skip

    def _event(self, kind: str, body: dict[str, Any]) -> bytes:
        out = sse_event(kind, {**body, "sequence_number": self.sequence, "type": kind})
        self.sequence += 1
        return out

    def opening(self) -> bytes:
        part = {"annotations": [], "text": "", "type": "output_text", "logprobs": []}
        return (
            self._event("response.created", {"response": self.body("", None, None)})
            + self._event("response.in_progress", {"response": self.body("", None, None)})
            + self._event(
                "response.output_item.added", {"item": self._output("", "in_progress"), "output_index": 0}
            )
            + self._event(
                "response.content_part.added",
                {"content_index": 0, "item_id": self.item, "output_index": 0, "part": part},
            )
        )

    def delta(self, text: str, finish: str | None) -> bytes:
        self.text += text
        body = {"content_index": 0, "delta": text, "item_id": self.item, "logprobs": [], "output_index": 0}
        return self._event("response.output_text.delta", body)

    def closing(self, finish: str | None, usage: dict[str, Any]) -> bytes:
        part: dict[str, Any] = {"annotations": [], "text": self.text, "type": "output_text", "logprobs": None}
        where = {"content_index": 0, "item_id": self.item, "output_index": 0}
        return (
            self._event("response.output_text.done", {**where, "logprobs": [], "text": self.text})
            + self._event("response.content_part.done", {**where, "part": part})
            + self._event(
                "response.output_item.done", {"item": self._output(self.text, "completed"), "output_index": 0}
            )
            + self._event("response.completed", {"response": self.body(self.text, finish, usage)})
        )

    def error(self, status: int, message: str) -> bytes:
        return self._event("error", {"code": str(status), "message": message, "param": None})
