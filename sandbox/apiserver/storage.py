"""In-memory object storage: one global resourceVersion counter, a bounded event log, watchers.

Everything runs on one asyncio loop, so no locking is needed: a write, its event and the
notification of every watcher happen in one synchronous step.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, str, str, str]  # group, plural, namespace ("" when cluster-scoped), name


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    rv: int
    group: str
    plural: str
    obj: dict[str, Any]
    old: dict[str, Any] | None


@dataclass
class Watcher:
    group: str
    plural: str
    namespace: str | None
    queue: asyncio.Queue[WatchEvent] = field(default_factory=asyncio.Queue)


class Store:
    def __init__(self, *, window: int = 5000) -> None:
        self._objects: dict[Key, dict[str, Any]] = {}
        self._rv = 1
        self._log: deque[WatchEvent] = deque(maxlen=window)
        self._watchers: list[Watcher] = []
        self._listeners: list[Callable[[WatchEvent], None]] = []

    # -- resource versions -------------------------------------------------------------------
    @property
    def current_rv(self) -> int:
        return self._rv

    def oldest_watchable_rv(self) -> int:
        """A watch may start from any rv ≥ this one; older ones answer 410 Gone."""
        if len(self._log) < (self._log.maxlen or 0):
            return 0
        return self._log[0].rv - 1

    def next_rv(self) -> int:
        self._rv += 1
        return self._rv

    # -- reads --------------------------------------------------------------------------------
    def get(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self._objects.get((group, plural, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def peek(self, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object itself (no copy): callers must not mutate it."""
        return self._objects.get((group, plural, namespace, name))

    def snapshot(self, group: str, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for o in self.iter(group, plural, namespace)]

    def iter(self, group: str, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Stored objects without copying, sorted by namespace then name (callers must not mutate)."""
        items = [
            (k[2], k[3], obj)
            for k, obj in self._objects.items()
            if k[0] == group and k[1] == plural and (namespace is None or k[2] == namespace)
        ]
        items.sort(key=lambda t: (t[0], t[1]))
        return [obj for _, _, obj in items]

    # -- writes (the caller has set metadata.resourceVersion to a fresh `next_rv()`) -----------
    def put(self, group: str, plural: str, obj: dict[str, Any], *, created: bool) -> None:
        meta = obj["metadata"]
        key = (group, plural, meta.get("namespace", ""), meta["name"])
        old = self._objects.get(key)
        stored = copy.deepcopy(obj)
        self._objects[key] = stored
        self._emit(
            WatchEvent(
                "ADDED" if created else "MODIFIED", int(meta["resourceVersion"]), group, plural, stored, old
            )
        )

    def remove(self, group: str, plural: str, namespace: str, name: str, rv: int) -> dict[str, Any] | None:
        old = self._objects.pop((group, plural, namespace, name), None)
        if old is None:
            return None
        final = copy.deepcopy(old)
        final["metadata"]["resourceVersion"] = str(rv)
        self._emit(WatchEvent("DELETED", rv, group, plural, final, old))
        return final

    # -- watching -----------------------------------------------------------------------------
    def _emit(self, event: WatchEvent) -> None:
        self._log.append(event)
        namespace = event.obj["metadata"].get("namespace", "")
        for watcher in self._watchers:
            same_kind = watcher.group == event.group and watcher.plural == event.plural
            if same_kind and watcher.namespace in (None, namespace):
                watcher.queue.put_nowait(event)
        for listener in self._listeners:
            listener(event)

    def events_since(self, group: str, plural: str, namespace: str | None, rv: int) -> list[WatchEvent]:
        return [
            e
            for e in self._log
            if e.rv > rv
            and e.group == group
            and e.plural == plural
            and (namespace is None or e.obj["metadata"].get("namespace", "") == namespace)
        ]

    def add_watcher(self, group: str, plural: str, namespace: str | None) -> Watcher:
        watcher = Watcher(group, plural, namespace)
        self._watchers.append(watcher)
        return watcher

    def remove_watcher(self, watcher: Watcher) -> None:
        if watcher in self._watchers:
            self._watchers.remove(watcher)

    def add_listener(self, listener: Callable[[WatchEvent], None]) -> None:
        """In-process subscribers (the controllers) called synchronously on every write."""
        self._listeners.append(listener)
