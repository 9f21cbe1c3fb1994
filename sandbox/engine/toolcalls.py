"""A tool call as each API answers it, as vLLM 0.32 writes it (``sandbox.engine.tools`` plans the call).

- Chat: ``message.tool_calls`` (``content`` ``""``), finish reason ``tool_calls`` (``stop`` when the
  request named the function). Streamed: one chunk naming the call (``id``, ``type``, ``index``,
  ``function.name``), chunks of ``function.arguments``, a chunk with an empty delta and the finish reason.
- Messages: a ``tool_use`` block (``input`` the arguments as an object), ``stop_reason`` ``tool_use``.
  Streamed: ``content_block_start`` with the block and ``input: {}``, then ``input_json_delta`` events.
- Responses: a ``function_call`` output item. Streamed: ``response.function_call_arguments.delta`` events
  and ``.done``.

Ids are vLLM's: ``chatcmpl-tool-<16 hex>`` for the call, ``fc_<16 hex>`` for the Responses item.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from sandbox.engine.dialects import MessageStream, ResponseWriter, sse_event
from sandbox.engine.openai import ChunkWriter, CompletionRequest
from sandbox.engine.tools import PlannedCall


def call_id() -> str:
    return f"chatcmpl-tool-{secrets.token_hex(8)}"


def chat_finish(call: PlannedCall) -> str:
    return "stop" if call.named else "tool_calls"


def chat_message(call: PlannedCall, ident: str) -> dict[str, Any]:
    function = {"name": call.name, "arguments": call.arguments}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": ident, "type": "function", "function": function}],
    }


def tool_use_block(call: PlannedCall, ident: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": call.name, "input": json.loads(call.arguments)}


class ChatToolChunks(ChunkWriter):
    def __init__(self, req: CompletionRequest, request_id: str, call: PlannedCall) -> None:
        super().__init__(req, request_id)
        self.call, self.call_id = call, call_id()

    def _choice(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "token_ids": None}
        if finish is not None:
            choice["stop_reason"] = None
        return self._event([choice])

    def opening(self) -> bytes:
        named = {"id": self.call_id, "type": "function", "index": 0, "function": {"name": self.call.name}}
        return super().opening() + self._choice({"content": None, "tool_calls": [named]})

    def delta(self, text: str, finish_reason: str | None) -> bytes:
        if not text:
            return b""
        return self._choice({"content": None, "tool_calls": [{"index": 0, "function": {"arguments": text}}]})

    def closing(self, finish_reason: str | None, usage_body: dict[str, Any]) -> bytes:
        return self._choice({}, finish_reason) + super().closing(finish_reason, usage_body)


class ToolUseStream(MessageStream):
    def __init__(
        self, req: CompletionRequest, request_id: str, prompt_tokens: int, call: PlannedCall
    ) -> None:
        super().__init__(req, request_id, prompt_tokens)
        self.call, self.call_id = call, call_id()

    def block(self) -> dict[str, Any]:
        return {"type": "tool_use", "id": self.call_id, "name": self.call.name, "input": {}}

    def delta(self, text: str, finish: str | None) -> bytes:
        if not text:
            return b""
        body = {
            "type": "content_block_delta",
            "delta": {"type": "input_json_delta", "partial_json": text},
            "index": 0,
        }
        return sse_event("content_block_delta", body)


class FunctionCallWriter(ResponseWriter):
    def __init__(self, req: CompletionRequest, request_id: str, call: PlannedCall) -> None:
        super().__init__(req, request_id)
        self.call, self.call_id = call, call_id()
        self.item = f"fc_{secrets.token_hex(8)}"

    def _item(self, arguments: str, status: str) -> dict[str, Any]:
        return {
            "arguments": arguments, "call_id": self.call_id, "name": self.call.name, "type": "function_call",
            "id": self.item, "async": None, "caller": None, "namespace": None, "status": status,
        }  # fmt: skip

    def final_output(self, text: str) -> list[dict[str, Any]]:
        return [self._item(self.call.arguments, "completed")]

    def opening(self) -> bytes:
        return (
            self._event("response.created", {"response": self.body("", None, None)})
            + self._event("response.in_progress", {"response": self.body("", None, None)})
            + self._event(
                "response.output_item.added", {"item": self._item("", "in_progress"), "output_index": 0}
            )
        )

    def delta(self, text: str, finish: str | None) -> bytes:
        if not text:
            return b""
        self.text += text
        body = {"delta": text, "item_id": self.item, "output_index": 0}
        return self._event("response.function_call_arguments.delta", body)

    def closing(self, finish: str | None, usage: dict[str, Any]) -> bytes:
        done = {"arguments": self.text, "item_id": self.item, "output_index": 0, "name": self.call.name}
        return (
            self._event("response.function_call_arguments.done", done)
            + self._event(
                "response.output_item.done", {"item": self._item(self.text, "completed"), "output_index": 0}
            )
            + self._event("response.completed", {"response": self.body(self.text, finish, usage)})
        )
