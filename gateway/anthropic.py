"""Anthropic's Messages API on top of the topology's chat completions (translation is pure).

So that coding assistants speaking that protocol (Claude Code with ``ANTHROPIC_BASE_URL``) can use
a cluster: system prompts, text and tool-use blocks, tool results, stop reasons and usage map to
and from OpenAI's chat format; a stream becomes Anthropic's event sequence (message_start,
content_block_start/delta/stop, message_delta, message_stop).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.bodies import read_whole
from gateway.errors import GatewayError
from gateway.failover import open_answer
from gateway.outcome import Outcome
from gateway.routes import RouteEntry
from gateway.sse import SseReader, chat_chunks
from gateway.tokencount import estimate_tokens

Send = Callable[[dict[str, Any]], Awaitable[None]]
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "end_turn",
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _user_messages(content: Any) -> list[dict[str, Any]]:
    """A user turn: tool results become `tool` messages, the rest one user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[dict[str, Any]] = []
    texts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(block.get("tool_use_id", "")),
                    "content": _text(block.get("content")),
                }
            )
        elif block.get("type") == "text":
            texts.append(str(block.get("text", "")))
    if texts:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant_message(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    message: dict[str, Any] = {"role": "assistant", "content": _text(content) or None}
    calls = [
        {
            "id": str(block.get("id", "")),
            "type": "function",
            "function": {
                "name": str(block.get("name", "")),
                "arguments": json.dumps(block.get("input") or {}),
            },
        }
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, dict) and block.get("type") == "tool_use"
    ]
    if calls:
        message["tool_calls"] = calls
    return message


def to_chat(request: dict[str, Any]) -> dict[str, Any]:
    """A Messages request as a chat-completions request."""
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayError(400, "invalid_request", "`messages` must be a non-empty list.", param="messages")
    max_tokens = request.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise GatewayError(
            400, "invalid_request", "`max_tokens` must be a positive integer.", param="max_tokens"
        )
    chat: list[dict[str, Any]] = []
    system = _text(request.get("system"))
    if system:
        chat.append({"role": "system", "content": system})
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant", "system"):
            raise GatewayError(
                400,
                "invalid_request",
                f"messages.{index}.role: each message needs role user, assistant or system; got {role!r}.",
                param=f"messages.{index}.role",
            )
        assert isinstance(message, dict)
        if role == "system":  # Claude Code's mid-conversation system prompts: kept where they stand
            text = _text(message.get("content"))
            if text:
                chat.append({"role": "system", "content": text})
        elif role == "user":
            chat.extend(_user_messages(message.get("content")))
        else:
            chat.append(_assistant_message(message.get("content")))
    body: dict[str, Any] = {"model": request["model"], "messages": chat, "max_tokens": max_tokens}
    for name in ("temperature", "top_p", "stream"):
        if name in request:
            body[name] = request[name]
    if isinstance(request.get("stop_sequences"), list):
        body["stop"] = request["stop_sequences"]
    tools = request.get("tools")
    if isinstance(tools, list) and tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": str(t.get("name", "")),
                    "description": str(t.get("description", "")),
                    "parameters": t.get("input_schema") or {"type": "object"},
                },
            }
            for t in tools
            if isinstance(t, dict)
        ]
        choice = request.get("tool_choice")
        if isinstance(choice, dict):
            kind = choice.get("type")
            if kind == "any":
                body["tool_choice"] = "required"
            elif kind == "tool":
                body["tool_choice"] = {"type": "function", "function": {"name": str(choice.get("name", ""))}}
            elif kind == "none":
                body["tool_choice"] = "none"
    return body


def from_chat(answer: dict[str, Any], model: str) -> dict[str, Any]:
    """A chat-completions answer as a Messages answer."""
    choice = (answer.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    thought = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(thought, str) and thought:
        content.append({"type": "thinking", "thinking": thought, "signature": ""})
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"_raw": function.get("arguments")}
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id") or _id("toolu"),
                "name": function.get("name", ""),
                "input": arguments,
            }
        )
    usage = answer.get("usage") or {}
    return {
        "id": _id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason") or "stop", "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": int(usage.get("prompt_tokens") or 0),
            "output_tokens": int(usage.get("completion_tokens") or 0),
        },
    }


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class StreamTranslator:
    """Chat-completion chunks in, Messages stream events out."""

    def __init__(self, model: str, estimated_input: int = 0) -> None:
        self.model = model
        self.estimated_input = estimated_input
        self.index = -1
        self.open_kind: str | None = None
        self.tool_index: dict[int, int] = {}
        self.stop_reason = "end_turn"
        self.input_tokens = 0
        self.output_tokens = 0

    def start(self, first: dict[str, Any] | None = None) -> bytes:
        """message_start, once the first chunk is in: its usage when the engine sends usage on every
        chunk, else the gateway's estimate (the real count follows in message_delta)."""
        usage = (first or {}).get("usage")
        if isinstance(usage, dict) and usage.get("prompt_tokens"):
            self.input_tokens = int(usage["prompt_tokens"])
        message: dict[str, Any] = {
            "id": _id("msg"),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens or self.estimated_input, "output_tokens": 0},
        }
        return _event("message_start", {"type": "message_start", "message": message})

    def _close(self) -> bytes:
        if self.open_kind is None:
            return b""
        self.open_kind = None
        return _event("content_block_stop", {"type": "content_block_stop", "index": self.index})

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self.index += 1
        self.open_kind = kind
        return out + _event(
            "content_block_start",
            {"type": "content_block_start", "index": self.index, "content_block": block},
        )

    def chunk(self, chunk: dict[str, Any]) -> bytes:
        out = b""
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.input_tokens = int(usage.get("prompt_tokens") or 0)
            self.output_tokens = int(usage.get("completion_tokens") or 0)
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                if self.open_kind != "thinking":
                    out += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                out += _event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": self.index,
                        "delta": {"type": "thinking_delta", "thinking": thought},
                    },
                )
            if delta.get("content"):
                if self.open_kind != "text":
                    out += self._open("text", {"type": "text", "text": ""})
                out += _event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": self.index,
                        "delta": {"type": "text_delta", "text": delta["content"]},
                    },
                )
            for call in delta.get("tool_calls") or []:
                position = int(call.get("index", 0))
                function = call.get("function") or {}
                if position not in self.tool_index:
                    out += self._open(
                        "tool",
                        {
                            "type": "tool_use",
                            "id": call.get("id") or _id("toolu"),
                            "name": function.get("name", ""),
                            "input": {},
                        },
                    )
                    self.tool_index[position] = self.index
                if function.get("arguments"):
                    out += _event(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": self.index,
                            "delta": {"type": "input_json_delta", "partial_json": function["arguments"]},
                        },
                    )
            if choice.get("finish_reason"):
                self.stop_reason = STOP_REASONS.get(choice["finish_reason"], "end_turn")
        return out

    def finish(self) -> bytes:
        return (
            self._close()
            + _event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                    "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
                },
            )
            + _event("message_stop", {"type": "message_stop"})
        )


async def serve(request: dict[str, Any], entry: RouteEntry, send: Send, outcome: Outcome) -> None:
    chat = to_chat(request)
    outcome.stream = bool(chat.get("stream"))
    if outcome.stream:
        chat["stream_options"] = {"include_usage": True}
    started = time.monotonic()
    response = await open_answer("/v1/chat/completions", chat, entry, outcome)
    outcome.status = response.status
    headers = [
        (b"x-tandem-backend", outcome.backend.encode()),
        (b"x-tandem-topology", entry.topology_name.encode()),
    ]
    try:
        if response.status != 200:
            body = await read_whole(response, limit=1 << 20)
            try:
                message = (
                    json.loads(body).get("error", {}).get("message") or body.decode(errors="replace")[:300]
                )
            except (ValueError, AttributeError):
                message = body.decode(errors="replace")[:300]
            raise GatewayError(
                response.status if response.status < 600 else 502, "upstream_error", str(message)
            )
        if not outcome.stream:
            answer = json.loads(await read_whole(response))  # whole: no first token, no TTFT
            translated = from_chat(answer, str(request["model"]))
            outcome.prompt_tokens = translated["usage"]["input_tokens"]
            outcome.completion_tokens = translated["usage"]["output_tokens"]
            outcome.started = True
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json"), *headers],
                }
            )
            await send({"type": "http.response.body", "body": json.dumps(translated).encode()})
            return
        translator = StreamTranslator(str(request["model"]), estimate_tokens(chat))
        outcome.started = True
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                    *headers,
                ],
            }
        )
        reader = SseReader()
        opened = False
        async for piece in response.content.iter_any():
            chunks, _ = chat_chunks(reader, piece)
            outcome.streamed_chunks += len(chunks)
            out = b""
            if chunks and not opened:
                out, opened = translator.start(chunks[0]), True
            out += b"".join(translator.chunk(chunk) for chunk in chunks)
            if out:
                if outcome.ttft_ms is None:
                    outcome.ttft_ms = (time.monotonic() - started) * 1000
                await send({"type": "http.response.body", "body": out, "more_body": True})
        closing = translator.finish() if opened else translator.start() + translator.finish()
        await send({"type": "http.response.body", "body": closing, "more_body": False})
        outcome.prompt_tokens, outcome.completion_tokens = translator.input_tokens, translator.output_tokens
    finally:
        response.release()
