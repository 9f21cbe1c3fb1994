"""Chat-completion chunks in, the Responses event stream out (pure).

``response.created`` and ``response.in_progress`` open it; each output item (reasoning, a message, a
function call) is announced with ``response.output_item.added``, grows with its deltas and closes with
its ``.done`` events; the stream ends with ``response.completed``, ``response.incomplete`` (the answer
was cut at ``max_output_tokens``) or ``response.failed`` (the upstream broke off). Every event carries
its ``sequence_number``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway.responses.answer import (
    INCOMPLETE,
    Shell,
    call_item,
    chat_usage,
    message_item,
    new_id,
    reasoning_item,
)


@dataclass
class _Open:
    kind: str  # "reasoning", "message" or "call"
    index: int
    item_id: str
    text: str = ""
    call_id: str = ""
    name: str = ""


@dataclass
class StreamTranslator:
    shell: Shell
    namespaces: dict[str, tuple[str, str]] = field(default_factory=dict)
    sequence: int = 0
    output: list[dict[str, Any]] = field(default_factory=list)
    current: _Open | None = None
    calls: dict[int, _Open] = field(default_factory=dict)
    finish: str | None = None
    usage: dict[str, Any] | None = None
    content_seen: bool = False

    def _event(self, kind: str, body: dict[str, Any]) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **body}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()

    def start(self) -> bytes:
        opening = self.shell.body(status="in_progress", output=[])
        return self._event("response.created", {"response": opening}) + self._event(
            "response.in_progress", {"response": opening}
        )

    # --- items -----------------------------------------------------------------------------------------
    def _close(self) -> bytes:
        item, self.current = self.current, None
        if item is None:
            return b""
        where = {"item_id": item.item_id, "output_index": item.index}
        if item.kind == "message":
            part = {"type": "output_text", "text": item.text, "annotations": [], "logprobs": []}
            done = message_item(item.item_id, item.text)
            out = self._event(
                "response.output_text.done", {**where, "content_index": 0, "text": item.text, "logprobs": []}
            )
            out += self._event("response.content_part.done", {**where, "content_index": 0, "part": part})
        elif item.kind == "reasoning":
            part = {"type": "summary_text", "text": item.text}
            done = reasoning_item(item.item_id, item.text)
            out = self._event(
                "response.reasoning_summary_text.done", {**where, "summary_index": 0, "text": item.text}
            )
            out += self._event(
                "response.reasoning_summary_part.done", {**where, "summary_index": 0, "part": part}
            )
        else:
            done = call_item(item.item_id, item.call_id, item.name, item.text, self.namespaces, "completed")
            out = self._event(
                "response.function_call_arguments.done",
                {**where, "name": done["name"], "arguments": item.text},
            )
        self.output.append(done)
        return out + self._event("response.output_item.done", {"output_index": item.index, "item": done})

    def _open(self, item: _Open) -> bytes:
        out = self._close()
        self.current = item
        where = {"item_id": item.item_id, "output_index": item.index}
        if item.kind == "message":
            added = message_item(item.item_id, "", "in_progress")
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out += self._event("response.output_item.added", {"output_index": item.index, "item": added})
            return out + self._event(
                "response.content_part.added", {**where, "content_index": 0, "part": part}
            )
        if item.kind == "reasoning":
            out += self._event(
                "response.output_item.added",
                {"output_index": item.index, "item": reasoning_item(item.item_id, "")},
            )
            part = {"type": "summary_text", "text": ""}
            return out + self._event(
                "response.reasoning_summary_part.added", {**where, "summary_index": 0, "part": part}
            )
        added = call_item(item.item_id, item.call_id, item.name, "", self.namespaces, "in_progress")
        return out + self._event("response.output_item.added", {"output_index": item.index, "item": added})

    def _next_index(self) -> int:
        return len(self.output) + (1 if self.current is not None else 0)

    def _text(self, kind: str, delta: str) -> bytes:
        out = b""
        if self.current is None or self.current.kind != kind:
            out += self._open(_Open(kind, self._next_index(), new_id("rs" if kind == "reasoning" else "msg")))
        assert self.current is not None
        self.current.text += delta
        where = {"item_id": self.current.item_id, "output_index": self.current.index}
        if kind == "reasoning":
            return out + self._event(
                "response.reasoning_summary_text.delta", {**where, "summary_index": 0, "delta": delta}
            )
        return out + self._event(
            "response.output_text.delta", {**where, "content_index": 0, "delta": delta, "logprobs": []}
        )

    def _call(self, call: dict[str, Any]) -> bytes:
        out = b""
        position = int(call.get("index", 0) or 0)
        function = call.get("function") or {}
        item = self.calls.get(position)
        if item is None:
            item = _Open(
                "call",
                self._next_index(),
                new_id("fc"),
                call_id=str(call.get("id") or new_id("call")),
                name=str(function.get("name") or ""),
            )
            self.calls[position] = item
            out += self._open(item)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            if self.current is not item:  # a parallel call's late arguments: rare, kept in order anyway
                item.text += arguments
                return out
            item.text += arguments
            out += self._event(
                "response.function_call_arguments.delta",
                {"item_id": item.item_id, "output_index": item.index, "delta": arguments},
            )
        return out

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        out = b""
        found = chat_usage(chunk.get("usage"))
        if found is not None:
            self.usage = found
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self.content_seen = True
                out += self._text("reasoning", thought)
            if isinstance(delta.get("content"), str) and delta["content"]:
                self.content_seen = True
                out += self._text("message", delta["content"])
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    self.content_seen = True
                    out += self._call(call)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        return out

    def finish_stream(self) -> bytes:
        out = self._close()
        incomplete = INCOMPLETE.get(str(self.finish))
        status = "incomplete" if incomplete else "completed"
        body = self.shell.body(status=status, output=self.output, usage=self.usage, incomplete=incomplete)
        return out + self._event(f"response.{status}", {"response": body})

    def fail(self, message: str) -> bytes:
        """The upstream broke off: what was sent stays, the response ends as failed."""
        out = self._close()
        error = {"code": "server_error", "message": message}
        body = self.shell.body(status="failed", output=self.output, usage=self.usage, error=error)
        return out + self._event("response.failed", {"response": body})
