"""Deterministic tokens: the same text always gives the same tokens and block hashes, in every process.

Words (whitespace-separated) are cut into chunks of at most four characters; each chunk is one
token. Block hashes chain like vLLM's prefix cache (BLAKE2b, 64 bits): a block's hash covers its
tokens and every block before it, so equal hashes mean equal prefixes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

CHUNK = 4
_FILLER = (
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "while", "prefill", "engines",
    "compute", "attention", "and", "decode", "engines", "stream", "tokens", "one", "step", "at", "a",
    "time", "across", "the", "cluster",
)  # fmt: skip


def tokenize(text: str, limit: int | None = None) -> list[str]:
    """The tokens of `text` (only the first ~`limit` when given)."""
    tokens: list[str] = []
    for word in text.split():
        if len(word) <= CHUNK:
            tokens.append(word)
        else:
            tokens.extend([word[start : start + CHUNK] for start in range(0, len(word), CHUNK)])
        if limit is not None and len(tokens) >= limit:
            break
    return tokens


def count_tokens(text: str) -> int:
    return sum((len(word) + CHUNK - 1) // CHUNK for word in text.split())


def block_hashes(tokens: Sequence[str], block_size: int, limit: int | None = None) -> list[int]:
    """Chained 64-bit hashes of the full blocks of `tokens` (at most `limit` blocks)."""
    hashes: list[int] = []
    parent = b""
    full = len(tokens) // block_size
    if limit is not None:
        full = min(full, limit)
    for index in range(full):
        block = "\x1f".join(tokens[index * block_size : (index + 1) * block_size]).encode()
        parent = hashlib.blake2b(parent + block, digest_size=8).digest()
        hashes.append(int.from_bytes(parent, "big"))
    return hashes


def chat_prompt(messages: Iterable[Mapping[str, Any]]) -> str:
    """Render chat messages the way a chat template would, as plain text."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
        parts.append(f"<|{message.get('role', 'user')}|> {content}")
    parts.append("<|assistant|>")
    return "\n".join(parts)


def filler(start: int, count: int) -> str:
    """`count` generated tokens' worth of text, starting at token index `start`."""
    words = [_FILLER[(start + i) % len(_FILLER)] for i in range(count)]
    return "".join(" " + w for w in words)
