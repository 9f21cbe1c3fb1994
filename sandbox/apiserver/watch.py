"""Watch streams: newline-delimited JSON events over a chunked response.

`resourceVersion` unset or "0" starts with synthetic ADDED events for the current state; any
other value replays the retained events after it, or answers an ERROR event carrying a 410
`Expired` Status ("too old resource version") when it is older than the retained window —
exactly what a real API server does. Selectors are applied to both the old and the new
object, so an object that stops matching arrives as DELETED and one that starts as ADDED.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sandbox.apiserver.errors import gone
from sandbox.apiserver.resources import ResourceType
from sandbox.apiserver.selectors import (
    FieldRequirement,
    Requirement,
    fields_match,
    labels_match,
)
from sandbox.apiserver.storage import Store, WatchEvent

BOOKMARK_INTERVAL = 5.0
Send = Callable[[dict[str, Any]], Awaitable[None]]
Transform = Callable[[dict[str, Any]], dict[str, Any]]


def _matches(obj: dict[str, Any] | None, labels: list[Requirement], fields: list[FieldRequirement]) -> bool:
    if obj is None:
        return False
    return labels_match(labels, obj["metadata"].get("labels")) and fields_match(fields, obj)


def translate(
    event: WatchEvent, labels: list[Requirement], fields: list[FieldRequirement]
) -> tuple[str, dict[str, Any]] | None:
    """The event a filtered watcher sees, or None."""
    new_ok = _matches(event.obj, labels, fields)
    if event.type == "DELETED":
        return ("DELETED", event.obj) if _matches(event.old, labels, fields) or new_ok else None
    old_ok = event.type == "MODIFIED" and _matches(event.old, labels, fields)
    if new_ok:
        return ("MODIFIED" if old_ok else "ADDED", event.obj)
    if old_ok:
        return ("DELETED", event.obj)
    return None


async def stream(
    store: Store,
    rt: ResourceType,
    namespace: str | None,
    labels: list[Requirement],
    fields: list[FieldRequirement],
    resource_version: str | None,
    timeout: float,
    bookmarks: bool,
    send: Send,
    transform: Transform,
) -> None:
    watcher = store.add_watcher(rt.group, rt.plural, namespace)
    try:
        deadline = time.monotonic() + timeout
        # Snapshot synchronously: anything newer arrives through the watcher's queue.
        last_rv = store.current_rv
        initial: list[dict[str, Any]]
        if not resource_version or resource_version == "0":
            initial = [
                {"type": "ADDED", "object": obj}
                for obj in store.snapshot(rt.group, rt.plural, namespace)
                if _matches(obj, labels, fields)
            ]
        else:
            try:
                since = int(resource_version)
            except ValueError:
                since = -1
            if since < store.oldest_watchable_rv():
                error = gone(f"too old resource version: {resource_version} ({store.current_rv})")
                await send({"type": "ERROR", "object": error.status()})
                return
            initial = []
            for event in store.events_since(rt.group, rt.plural, namespace, since):
                seen = translate(event, labels, fields)
                if seen:
                    initial.append({"type": seen[0], "object": seen[1]})
        for item in initial:
            await send({"type": item["type"], "object": transform(item["object"])})
        next_bookmark = time.monotonic() + BOOKMARK_INTERVAL
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(0.0, next_bookmark - now))
            try:
                event = await asyncio.wait_for(watcher.queue.get(), timeout=wait)
            except TimeoutError:
                if bookmarks and time.monotonic() >= next_bookmark:
                    await send(_bookmark(rt, store.current_rv))
                    next_bookmark = time.monotonic() + BOOKMARK_INTERVAL
                continue
            if event.rv <= last_rv:
                continue
            seen = translate(event, labels, fields)
            if seen:
                await send({"type": seen[0], "object": transform(seen[1])})
        if bookmarks:
            await send(_bookmark(rt, store.current_rv))
    finally:
        store.remove_watcher(watcher)


def _bookmark(rt: ResourceType, rv: int) -> dict[str, Any]:
    return {
        "type": "BOOKMARK",
        "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(rv)}},
    }


def encode(event: dict[str, Any]) -> bytes:
    return (json.dumps(event, separators=(",", ":")) + "\n").encode()
