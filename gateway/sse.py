"""Server-sent events, read as they arrive: split into events, find usage, drop what we added (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SseReader:
    """Feed bytes; get whole events (each ends with a blank line) back, in order."""

    buffer: bytes = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self.buffer += chunk
        events: list[bytes] = []
        while True:
            cut = _boundary(self.buffer)
            if cut is None:
                return events
            end, size = cut
            events.append(self.buffer[: end + size])
            self.buffer = self.buffer[end + size :]

    def rest(self) -> bytes:
        rest, self.buffer = self.buffer, b""
        return rest


def _boundary(buffer: bytes) -> tuple[int, int] | None:
    """(where the first event ends, the length of its blank-line separator)."""
    positions = [(buffer.find(sep), len(sep)) for sep in (b"\n\n", b"\r\n\r\n")]
    found = [(p, n) for p, n in positions if p >= 0]
    return min(found) if found else None


def event_data(event: bytes) -> bytes | None:
    """The data of an event (joined lines), or None when it has none."""
    lines = [line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


@dataclass
class StreamStats:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_content: bool = False
    chunks: list[Any] = field(default_factory=list)


def inspect_chunk(data: bytes, stats: StreamStats) -> tuple[bool, dict[str, Any] | None]:
    """(is this the usage-only chunk, the parsed chunk). Counts usage and notes the first content."""
    if data == b"[DONE]":
        return False, None
    try:
        chunk = json.loads(data)
    except ValueError:
        return False, None
    if not isinstance(chunk, dict):
        return False, None
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        stats.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        stats.completion_tokens = int(usage.get("completion_tokens") or 0)
    choices = chunk.get("choices")
    if choices:
        stats.first_content = True
    return (not choices and isinstance(usage, dict)), chunk


def chat_chunks(reader: SseReader, piece: bytes) -> tuple[list[dict[str, Any]], bool]:
    """The chat-completion chunks whole in `piece` (with what the reader held), and whether [DONE] came."""
    chunks: list[dict[str, Any]] = []
    done = False
    for event in reader.feed(piece):
        data = event_data(event)
        if data == b"[DONE]":
            done = True
        if data is None or data == b"[DONE]":
            continue
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        if isinstance(chunk, dict):
            chunks.append(chunk)
    return chunks, done
