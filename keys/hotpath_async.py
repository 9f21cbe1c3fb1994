"""The same check as :mod:`keys.hotpath` for asyncio callers (the gateway): no thread hop per request.

A cached key costs one Redis round trip (redis.asyncio, the same Lua script); a cache miss reads
the database in a worker thread once, then the key is served from memory.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings

from keys import limits, tokens
from keys.hotpath import (
    UNKNOWN,
    KeyRefused,
    cache,
    over_limit,
    parse_or_refuse,
    pepper,
    refuse_unusable,
    still_changing,
)
from keys.records import KeyRecord

_clients: dict[int, tuple[aioredis.Redis, Any, Any]] = {}


def _client() -> tuple[aioredis.Redis, Any, Any]:
    """One client (and its registered scripts) per event loop."""
    loop_id = id(asyncio.get_running_loop())
    found = _clients.get(loop_id)
    if found is None:
        client = aioredis.Redis.from_url(
            settings.REDIS_URL,
            socket_connect_timeout=settings.KEYS_REDIS_TIMEOUT_SECONDS,
            socket_timeout=settings.KEYS_REDIS_TIMEOUT_SECONDS,
            health_check_interval=30,
        )
        found = (
            client,
            client.register_script(limits.ACQUIRE_LUA),
            client.register_script(limits.SETTLE_LUA),
        )
        _clients[loop_id] = found
    return found


class AsyncGrant:
    def __init__(self, record: KeyRecord, slot: str, crossed: tuple[str, ...]) -> None:
        self.record = record
        self.slot = slot
        self.crossed = crossed

    async def settle(self, *, tokens_used: int = 0) -> tuple[str, ...]:
        if not self.slot and tokens_used <= 0:
            return ()
        _, _, settle_script = _client()
        keys, args = limits.settle_call(
            self.record, slot=self.slot, tokens=tokens_used, now=datetime.now(UTC)
        )
        self.slot = ""
        reply = await settle_script(keys, args)
        return tuple(part.decode() if isinstance(part, bytes) else str(part) for part in reply[1:])


async def _load(digest: str) -> KeyRecord | None:
    from keys.selectors import key_id_for_digest, key_record_for_digest

    key_id = await sync_to_async(key_id_for_digest)(digest=digest)
    if key_id is None:
        return None
    client, _, _ = _client()
    value = await client.get(limits.generation_key(key_id))
    generation = value.decode() if isinstance(value, bytes) else "none"
    return await sync_to_async(key_record_for_digest)(digest=digest, generation=generation)


async def _reload(digest: str, generation: str) -> KeyRecord:
    from keys.selectors import key_record_for_digest

    fresh = await sync_to_async(key_record_for_digest)(digest=digest, generation=generation)
    cache.put(digest, fresh)
    if fresh is None:
        raise KeyRefused(401, "key_unknown", UNKNOWN)
    return fresh


async def authenticate(raw: str, *, kind: str, source_ip: str | None) -> AsyncGrant:
    parsed = parse_or_refuse(raw)
    digest = tokens.digest(parsed.token, pepper())
    found, record = cache.get(digest)
    if not found:
        record = await _load(digest)
        cache.put(digest, record)
    if record is None:
        raise KeyRefused(401, "key_unknown", UNKNOWN)
    _, acquire_script, _ = _client()
    for _attempt in range(3):
        now = limits.now_utc()
        try:
            refuse_unusable(record, kind=kind, source_ip=source_ip, now=now)
        except KeyRefused:
            client, _, _ = _client()  # a refusal from memory is checked against the generation first
            value = await client.get(limits.generation_key(record.key_id))
            current = value.decode() if isinstance(value, bytes) else "none"
            if current == record.generation:
                raise
            record = await _reload(digest, current)
            continue
        slot = uuid.uuid4().hex
        keys, args = limits.acquire_call(record, slot=slot, source_ip=source_ip, now=now)
        outcome = limits.acquire_outcome(record, await acquire_script(keys, args), slot=slot, now=now)
        if isinstance(outcome, limits.Stale):
            record = await _reload(digest, outcome.generation)
            continue
        if isinstance(outcome, limits.OverLimit):
            raise over_limit(outcome, record)
        return AsyncGrant(record, outcome.slot, outcome.crossed)
    raise still_changing()
