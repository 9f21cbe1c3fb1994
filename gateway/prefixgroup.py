"""A request's prefix group: a short stable hash of its leading content, the part a prefix cache reuses.

The leading content is the system prompt (chat's system messages, Anthropic's `system`, the Responses
API's `instructions`) followed by the first messages' text, cut at `PREFIX_CHARS` characters. Two
requests with the same group start with the same text, so an engine that served one holds the other's
leading KV blocks in its prefix cache. Computed on the already parsed body (blake2b over at most
`PREFIX_CHARS` characters: 4 to 13 µs a request on a busy 2-core machine, docs/hit-rate.md); a shape
it does not know reads as no text, never an error.
"""

from __future__ import annotations

from hashlib import blake2b
from typing import Any

PREFIX_CHARS = 2000
GROUP_BYTES = 8  # 16 hex characters: collisions are negligible among a window's distinct prefixes


def _text(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts/blocks with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _messages(items: Any) -> list[tuple[str, str]]:
    if isinstance(items, str):
        return [("user", items)]
    if not isinstance(items, list):
        return []
    found = []
    for item in items:
        if isinstance(item, dict):
            found.append((str(item.get("role", "")), _text(item.get("content"))))
    return found


def leading_text(request: dict[str, Any], *, budget: int = PREFIX_CHARS) -> str:
    """System prompt / instructions, then the first messages (role-tagged), cut at ``budget`` characters."""
    parts: list[str] = []
    size = 0
    head = [("system", _text(request.get("system"))), ("system", _text(request.get("instructions")))]
    body = _messages(request.get("messages"))
    if not body:
        body = _messages(request.get("input"))
    if not body and isinstance(request.get("prompt"), str):  # legacy completions
        body = [("user", request["prompt"])]
    for role, text in (*head, *body):
        if not text:
            continue
        piece = f"\x1e{role}\x1f{text[: budget - size]}"
        parts.append(piece[: budget - size])
        size += len(parts[-1])
        if size >= budget:
            break
    return "".join(parts)


def prefix_group(request: dict[str, Any] | None, *, budget: int = PREFIX_CHARS) -> str:
    """16 hex characters naming the request's leading content; "" when it has none."""
    if not request:
        return ""
    text = leading_text(request, budget=budget)
    if not text:
        return ""
    return blake2b(text.encode("utf-8", "replace"), digest_size=GROUP_BYTES).hexdigest()
