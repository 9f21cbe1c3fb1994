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
        buffer = self.buffer + chunk if self.buffer else chunk
        events: list[bytes] = []
        start = 0
        crlf = b"\r" in buffer  # the common case (LF only) looks for one separator
        while True:
            cut = _boundary(buffer, start) if crlf else _lf_boundary(buffer, start)
            if cut < 0:
                break
            events.append(buffer[start:cut])
            start = cut
        self.buffer = buffer[start:] if start else buffer
        return events

    def rest(self) -> bytes:
        rest, self.buffer = self.buffer, b""
        return rest


def _lf_boundary(buffer: bytes, start: int) -> int:
    """Where the event beginning at `start` ends (after its blank line), or -1 when it has not ended."""
    end = buffer.find(b"\n\n", start)
    return end + 2 if end >= 0 else -1


def _boundary(buffer: bytes, start: int) -> int:
    """As `_lf_boundary`, with CRLF blank lines too: the earlier separator wins."""
    lf = buffer.find(b"\n\n", start)
    crlf = buffer.find(b"\r\n\r\n", start)
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return crlf + 4
    return lf + 2 if lf >= 0 else -1


def event_type(event: bytes) -> bytes:
    """The `event:` name of an event when its first line gives one (b"" otherwise)."""
    if not event.startswith(b"event:"):
        return b""
    end = event.find(b"\n")
    return event[6 : end if end >= 0 else len(event)].strip()


def event_data(event: bytes) -> bytes | None:
    """The data of an event (joined lines), or None when it has none."""
    lines = [line[5:].lstrip() for line in event.splitlines() if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


@dataclass
class StreamStats:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, when the engine says
    first_content: bool = False
    chunks: list[Any] = field(default_factory=list)


def cached_of(usage: dict[str, Any]) -> int | None:
    """Prompt tokens served from the prefix cache, as OpenAI's usage reports them (vLLM does with
    --enable-prompt-tokens-details), or None when the answer does not say."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) else None


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
        stats.cached_tokens = cached_of(usage)
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
