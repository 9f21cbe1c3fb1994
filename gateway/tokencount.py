"""``POST /v1/messages/count_tokens``: the engine's own count where it serves ``/tokenize``, else an
estimate the answer labels as one (``x-tandem-token-count: engine|estimate``; the body adds
``"estimated": true`` to Anthropic's ``{"input_tokens": N}``).

vLLM serves ``POST /tokenize`` with chat ``messages`` (and ``tools``) and applies the model's chat
template, so its count is what the prompt will cost. A P/D router or another engine may not serve it,
and the fallback never does: then about four characters a token, the rule of thumb for English and
code with BPE tokenizers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from gateway import upstream
from gateway.bodies import read_whole
from gateway.errors import GatewayError
from gateway.outcome import Outcome
from gateway.routes import RouteEntry

Send = Callable[[dict[str, Any]], Awaitable[None]]
CHARS_PER_TOKEN = 4
TOKENIZE_TIMEOUT = 5.0


def estimate_tokens(chat: dict[str, Any]) -> int:
    """About how many tokens a chat request's prompt is: its text and tool definitions, 4 chars each."""
    size = 0
    for message in chat.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            size += len(content)
        elif isinstance(content, list):
            size += sum(len(str(part.get("text", ""))) for part in content if isinstance(part, dict))
        for call in message.get("tool_calls") or []:
            size += len(json.dumps(call.get("function") or {}))
        size += 4  # the role and the template's markers around each message
    if chat.get("tools"):
        size += len(json.dumps(chat["tools"]))
    return max(1, size // CHARS_PER_TOKEN)


async def engine_count(entry: RouteEntry, chat: dict[str, Any]) -> int | None:
    """The engine's count from its /tokenize, or None when it has none (or cannot be asked now)."""
    if not entry.endpoint:
        return None
    body = {"model": entry.model, "messages": chat["messages"], "add_generation_prompt": True}
    if chat.get("tools"):
        body["tools"] = chat["tools"]
    try:
        response = await upstream.post(
            f"{entry.endpoint}/tokenize",
            json.dumps(body).encode(),
            headers={},
            first_byte_timeout=TOKENIZE_TIMEOUT,
        )
    except upstream.UpstreamFailed:
        return None
    try:
        if response.status != 200:
            return None
        answer = json.loads(await read_whole(response, limit=1 << 20))
    except (ValueError, GatewayError):
        return None
    finally:
        response.release()
    count = answer.get("count") if isinstance(answer, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


async def serve(chat: dict[str, Any], entry: RouteEntry, send: Send, outcome: Outcome) -> None:
    counted = await engine_count(entry, chat)
    body: dict[str, Any] = {"input_tokens": counted}
    source = b"engine"
    if counted is None:
        body = {"input_tokens": estimate_tokens(chat), "estimated": True}
        source = b"estimate"
    outcome.status = 200
    outcome.backend = "cluster" if counted is not None else "none"
    outcome.started = True
    headers = [(b"content-type", b"application/json"), (b"x-tandem-token-count", source)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})
