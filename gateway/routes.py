"""Model name → topology route, held in memory and reloaded when a route or topology changes.

Each process checks the routes' generation in Redis twice a second in a background task (never on
a request's path once loaded) and reloads the table from the database in a worker thread when it
changed; requests read the table from memory.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings

from keys import limits

REFRESH_SECONDS = 0.5
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fallback:
    base_url: str  # ends in /v1
    api_key: str
    model: str
    on_429: bool


@dataclass(frozen=True)
class RouteEntry:
    topology_id: int
    topology_name: str
    model: str  # the name the cluster serves
    names: tuple[str, ...]  # the model and its aliases
    endpoint: str  # the serving endpoint's root (no /v1), or "" when none is known
    fallback: Fallback | None
    timeout: float
    breaker_failures: int
    breaker_open_seconds: float
    # The engine serves /v1/responses itself (vLLM does; SGLang and MindIE get it translated).
    responses_passthrough: bool = False
    # The served model's context length (its engine's --max-model-len / --context-length), if known.
    context: int | None = None
    # The topology's SLO targets: a request over them is slow, and its trace is kept (traces.sampling).
    slo_ttft_ms: int | None = None
    slo_tbt_ms: int | None = None

    def allowed_by(self, allowed: tuple[str, ...]) -> bool:
        """A key's allow-list names the model served, an alias or the topology."""
        return not allowed or any(name in allowed for name in (*self.names, self.topology_name))


@dataclass(frozen=True)
class RouteTable:
    by_name: dict[str, RouteEntry]
    generation: str

    def entries(self) -> list[RouteEntry]:
        unique = {entry.topology_id: entry for entry in self.by_name.values()}
        return sorted(unique.values(), key=lambda e: e.model)


def generation_key() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'tandem')}:gateway:routes:gen"


def bump() -> None:
    import secrets

    limits.client().set(generation_key(), secrets.token_hex(8))


def name_owners(entries: list[RouteEntry]) -> dict[str, RouteEntry]:
    """Model name or alias → the entry the gateway sends it to: the first topology to claim the name
    (entries come ordered by topology id, so the oldest keeps it; pages say so where names are shared)."""
    by_name: dict[str, RouteEntry] = {}
    for entry in entries:
        for name in entry.names:
            by_name.setdefault(name, entry)
    return by_name


def load_table(generation: str) -> RouteTable:
    from gateway.selectors import route_entries

    return RouteTable(by_name=name_owners(route_entries()), generation=generation)


class _Holder:
    def __init__(self) -> None:
        self.table: RouteTable | None = None
        self.lock = asyncio.Lock()
        self.watcher: asyncio.Task[None] | None = None


_holders: dict[int, _Holder] = {}


async def _refresh(holder: _Holder) -> None:
    from keys.hotpath_async import REDIS_DOWN, _client

    client, _, _ = _client()
    try:
        value = await client.get(generation_key())
    except REDIS_DOWN:
        if holder.table is not None:
            raise
        # Redis away at the first request: load the routes from the database all the same (an
        # impossible generation, so the watcher reloads them once Redis answers).
        logger.warning("Redis is not answering: loading the gateway's routes without their generation")
        holder.table = await sync_to_async(load_table)("redis-away")
        return
    generation = value.decode() if isinstance(value, bytes) else "none"
    if holder.table is None or holder.table.generation != generation:
        holder.table = await sync_to_async(load_table)(generation)


async def _watch(holder: _Holder) -> None:
    """Look for a route change every REFRESH_SECONDS, off the request path."""
    while True:
        await asyncio.sleep(REFRESH_SECONDS)
        try:
            async with holder.lock:
                await _refresh(holder)
            from keys.hotpath_async import reconcile_if_due

            reconcile_if_due()  # usage counted while Redis was away goes in as soon as it answers
        except Exception:  # Redis or the database away: keep serving the table we have
            logger.warning("could not check the gateway's routes for changes; serving the last known ones")


def peek() -> RouteTable | None:
    """The table this event loop holds now, if loaded (no I/O)."""
    holder = _holders.get(id(asyncio.get_running_loop()))
    return holder.table if holder is not None else None


async def current() -> RouteTable:
    """The table in memory; the first call of an event loop loads it and starts its watcher."""
    holder = _holders.setdefault(id(asyncio.get_running_loop()), _Holder())
    if holder.table is None:
        async with holder.lock:
            if holder.table is None:
                await _refresh(holder)
    if holder.watcher is None or holder.watcher.done():
        holder.watcher = asyncio.get_running_loop().create_task(_watch(holder))
    assert holder.table is not None
    return holder.table
