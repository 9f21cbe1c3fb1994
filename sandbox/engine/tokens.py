"""Deterministic tokens: the same text always gives the same token ids, in every process.

Words (whitespace-separated) are cut into chunks of at most four characters; each chunk is one
token whose id is its CRC-32. Block hashes chain like vLLM's prefix cache: a block's hash covers
its tokens and every block before it, so equal hashes mean equal prefixes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

CHUNK = 4
_FILLER = (
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "while", "prefill", "engines",
    "compute", "attention", "and", "decode", "engines", "stream", "tokens", "one", "step", "at", "a",
    "time", "across", "the", "cluster",
)  # fmt: skip


@lru_cache(maxsize=65536)
def _word_ids(word: str) -> tuple[int, ...]:
    return tuple(zlib.crc32(word[start : start + CHUNK].encode()) for start in range(0, len(word), CHUNK))


def tokenize(text: str, limit: int | None = None) -> list[int]:
    """Token ids of `text` (only the first ~`limit` tokens when given)."""
    ids: list[int] = []
    for word in text.split():
        ids.extend(_word_ids(word))
        if limit is not None and len(ids) >= limit:
            break
    return ids


def count_tokens(text: str) -> int:
    return sum((len(word) + CHUNK - 1) // CHUNK for word in text.split())


def block_hashes(tokens: Sequence[int], block_size: int, limit: int | None = None) -> list[int]:
    """Chained hashes of the full blocks of `tokens` (at most `limit` blocks)."""
    hashes: list[int] = []
    parent = 0
    full = len(tokens) // block_size
    if limit is not None:
        full = min(full, limit)
    for index in range(full):
        parent = hash((parent, *tokens[index * block_size : (index + 1) * block_size]))
        hashes.append(parent)
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
