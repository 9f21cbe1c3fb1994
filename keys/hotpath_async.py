"""The same check as :mod:`keys.hotpath` for asyncio callers (the gateway): no thread hop per request.

A cached key costs one Redis round trip (redis.asyncio, the same Lua script); a cache miss reads
the database in a worker thread once, then the key is served from memory.

The scripts' keys and arguments are :func:`keys.limits.acquire_call`'s and ``settle_call``'s; they
change only with the key and the minute, so each key's are built and encoded once a minute and a
request fills in its own slot, time, address and tokens (:class:`_Packed`). The command goes out
as one pre-packed EVALSHA on a lane of redis.asyncio connections (:class:`_Lane`), retried as
redis-py retries its commands.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from datetime import datetime
from typing import Any

import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from keys import limits, outage, tokens
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

logger = logging.getLogger(__name__)
# Redis unreachable (refused, reset, timed out, loading): served on in-process limits (keys.outage).
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)
_clients: dict[int, tuple[aioredis.Redis, Any, Any]] = {}
_renew_scripts: dict[int, Any] = {}
_lanes: dict[int, _Lane] = {}


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
        _renew_scripts[loop_id] = client.register_script(limits.RENEW_LUA)
        _lanes[loop_id] = _Lane(client.connection_pool)
    return found


class _Lane:
    """Connections for the packed limit calls, two per request: a free list of the client's kind of
    connection without a socket timeout, and one deadline (``asyncio.timeout``) per call. redis-py's
    pool with a socket timeout costs a task per write (``wait_for``), a timer per read and a socket
    poll per checkout: about half of the CPU a call takes."""

    MAX_IDLE = 512

    def __init__(self, pool: Any) -> None:
        self.kwargs = {**pool.connection_kwargs, "socket_timeout": None}
        self.connection_class = pool.connection_class
        self.idle: list[Any] = []

    async def execute(self, command: bytes) -> Any:
        conn = self.idle.pop() if self.idle else self.connection_class(**self.kwargs)

        async def send() -> Any:
            await conn.send_packed_command(command)
            return await conn.read_response()

        try:
            async with asyncio.timeout(settings.KEYS_REDIS_TIMEOUT_SECONDS):
                reply = await conn.retry.call_with_retry(send, lambda _: conn.disconnect())
        except ResponseError:  # an error reply (NOSCRIPT, a script error): the connection is fine
            self._keep(conn)
            raise
        except TimeoutError:
            await conn.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout talking to Redis") from None
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        self._keep(conn)
        return reply

    def _keep(self, conn: Any) -> None:
        if len(self.idle) < self.MAX_IDLE:
            self.idle.append(conn)
        else:
            asyncio.get_running_loop().create_task(conn.disconnect(nowait=True))


class AsyncGrant:
    """A request admitted; ``settle`` it when the response is done. While it lives, its concurrency
    slot's lease is renewed every third of :data:`keys.limits.SLOT_LEASE_SECONDS`."""

    def __init__(
        self,
        record: KeyRecord,
        slot: str,
        crossed: tuple[str, ...],
        *,
        reserved: int = 0,
        windows: tuple[str, str, str] = ("", "", ""),
        local: bool = False,
    ) -> None:
        self.record = record
        self.slot = slot
        self.crossed = crossed
        self.reserved = reserved
        self.windows = windows
        self.local = local  # admitted by this process while Redis was away (keys.outage)
        self._renewal: asyncio.Task[None] | None = None
        if slot and not local:
            self._renewal = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        client, _, _ = _client()
        script = _renew_scripts[id(asyncio.get_running_loop())]
        key = limits.counter_key(self.record.key_id, "conc", "slots")
        while True:
            await asyncio.sleep(limits.SLOT_LEASE_SECONDS / 3)
            try:
                await script(keys=[key], args=[self.slot, str(limits.SLOT_LEASE_SECONDS)], client=client)
            except Exception:  # Redis away: the lease may lapse; the next renewal tries again
                logger.warning("could not renew a request's concurrency slot in Redis")

    async def settle(self, *, tokens_used: int = 0) -> tuple[str, ...]:
        if self._renewal is not None:
            self._renewal.cancel()
            self._renewal = None
        slot, reserved, self.slot, self.reserved = self.slot, self.reserved, "", 0
        if self.local:
            outage.settle_here(
                self.record, slot=slot, tokens=tokens_used, reserved=reserved, windows=self.windows
            )
            return ()
        if not slot and tokens_used <= 0 and reserved <= 0:
            return ()
        entry = outage.Settle(self.record, slot, max(0, tokens_used), reserved, self.windows)
        if outage.redis_away():
            outage.settle_later(entry)
            return ()
        try:
            return await _settle(entry)
        except REDIS_DOWN:
            outage.mark_down()
            outage.settle_later(entry)  # counted when Redis answers again: no usage lost
            return ()


async def _settle(entry: outage.Settle) -> tuple[str, ...]:
    client, _, settle_script = _client()
    command = _settle_command(
        entry.record, slot=entry.slot, tokens=entry.tokens, reserved=entry.reserved, windows=entry.windows
    )
    reply = await _evalsha(client, settle_script, command)
    return tuple(part.decode() if isinstance(part, bytes) else str(part) for part in reply[1:])


def _bulk(value: str) -> bytes:
    raw = value.encode()
    return b"$%d\r\n%s\r\n" % (len(raw), raw)


# Stand-ins for a request's own values while a key's call of the minute is built (never sent).
_SLOT, _ADDRESS, _TOKENS = "\x00slot\x00", "\x00address\x00", 9_007_199_254_740_993
_RESERVE, _RESERVED = 9_007_199_254_740_995, 9_007_199_254_740_997
_WINDOWS = ("\x00minute\x00", "\x00day\x00", "\x00month\x00")


class _Packed:
    """One script call as RESP bulk strings, with the places of the values that vary per request."""

    def __init__(self, keys: list[str], args: list[str], holes: dict[str, str]) -> None:
        self.numkeys = len(keys)
        self.parts = [_bulk(part) for part in (*keys, *args)]
        self.header = b"*%d\r\n$7\r\nEVALSHA\r\n" % (len(self.parts) + 3)
        self.numkeys_part = _bulk(str(self.numkeys))
        self.holes = {name: len(keys) + args.index(value) for name, value in holes.items() if value in args}
        self.complete = len(self.holes) == len(holes)

    def fill(self, **values: str) -> list[bytes]:
        parts = list(self.parts)
        for name, value in values.items():
            if name in self.holes:
                parts[self.holes[name]] = _bulk(value)
        return parts

    def command(self, sha: str, parts: list[bytes]) -> bytes:
        return b"".join((self.header, _bulk(sha), self.numkeys_part, *parts))


class _Calls:
    """Per key and minute: the packed call, built from limits' own keys and arguments."""

    def __init__(self, build: Callable[[KeyRecord, datetime], tuple[list[str], list[str], dict[str, str]]]):
        self.build = build
        self.entries: dict[int, tuple[KeyRecord, int, _Packed]] = {}

    def get(self, record: KeyRecord, now: datetime) -> _Packed:
        minute = int(now.timestamp() // 60)
        found = self.entries.get(id(record))
        if found is not None and found[0] is record and found[1] == minute:
            return found[2]
        keys, args, holes = self.build(record, now)
        packed = _Packed(keys, args, holes)
        if packed.complete:
            if len(self.entries) > 10_000:
                self.entries.clear()
            self.entries[id(record)] = (record, minute, packed)
        return packed


def _acquire_build(record: KeyRecord, now: datetime) -> tuple[list[str], list[str], dict[str, str]]:
    keys, args = limits.acquire_call(record, slot=_SLOT, source_ip=_ADDRESS, reserve=_RESERVE)
    holes = {"slot": _SLOT, "source_ip": _ADDRESS}
    if limits.has_token_limit(record):
        holes["reserve"] = str(_RESERVE)
    return keys, args, holes


def _settle_build(record: KeyRecord, now: datetime) -> tuple[list[str], list[str], dict[str, str]]:
    keys, args = limits.settle_call(record, slot=_SLOT, tokens=_TOKENS, reserved=_RESERVED, windows=_WINDOWS)
    holes = {"slot": _SLOT, "tokens": str(_TOKENS), "reserved": str(_RESERVED)}
    holes.update(zip(("minute", "day", "month"), _WINDOWS, strict=True))
    return keys, args, holes


_acquire_calls = _Calls(_acquire_build)
_settle_calls = _Calls(_settle_build)
Command = tuple[_Packed, list[bytes]]


def _acquire_command(
    record: KeyRecord, *, slot: str, source_ip: str | None, reserve: int, now: datetime
) -> Command:
    call = _acquire_calls.get(record, now)
    if call.complete:
        return call, call.fill(slot=slot, source_ip=source_ip or "", reserve=str(max(0, reserve)))
    keys, args = limits.acquire_call(record, slot=slot, source_ip=source_ip, reserve=reserve)
    whole = _Packed(keys, args, {})  # limits' layout hid a value from the holes: pack this call whole
    return whole, whole.parts


def _settle_command(
    record: KeyRecord, *, slot: str, tokens: int, reserved: int, windows: tuple[str, str, str]
) -> Command:
    call = _settle_calls.get(record, limits.now_utc())
    if call.complete:
        minute, day, month = windows
        return call, call.fill(
            slot=slot,
            tokens=str(max(0, tokens)),
            reserved=str(max(0, reserved)),
            minute=minute,
            day=day,
            month=month,
        )
    keys, args = limits.settle_call(record, slot=slot, tokens=tokens, reserved=reserved, windows=windows)
    whole = _Packed(keys, args, {})
    return whole, whole.parts


async def _evalsha(client: aioredis.Redis, script: Any, packed: Command) -> Any:
    """EVALSHA of a registered script; loads it when Redis lost it (as redis-py's Script does)."""
    call, parts = packed
    try:
        return await _execute(client, call.command(script.sha, parts))
    except NoScriptError:
        script.sha = await client.script_load(script.script)
        return await _execute(client, call.command(script.sha, parts))


async def _execute(client: aioredis.Redis, command: bytes) -> Any:
    """Redis.execute_command for a packed command: a connection of this loop's lane, redis-py's retries."""
    lane = _lanes.get(id(asyncio.get_running_loop()))
    if lane is None:
        lane = _lanes[id(asyncio.get_running_loop())] = _Lane(client.connection_pool)
    return await lane.execute(command)


async def _load(digest: str) -> KeyRecord | None:
    from keys.selectors import key_id_for_digest, key_record_for_digest

    key_id = await sync_to_async(key_id_for_digest)(digest=digest)
    if key_id is None:
        return None
    generation = "redis-away"  # never Redis's: the first call once Redis answers reloads the key
    if not outage.redis_away():
        client, _, _ = _client()
        try:
            value = await client.get(limits.generation_key(key_id))
            generation = value.decode() if isinstance(value, bytes) else "none"
        except REDIS_DOWN:
            outage.mark_down()
    return await sync_to_async(key_record_for_digest)(digest=digest, generation=generation)


async def _reload(digest: str, generation: str) -> KeyRecord:
    from keys.selectors import key_record_for_digest

    fresh = await sync_to_async(key_record_for_digest)(digest=digest, generation=generation)
    cache.put(digest, fresh)
    if fresh is None:
        raise KeyRefused(401, "key_unknown", UNKNOWN)
    return fresh


async def _generation(client: aioredis.Redis, key_id: str) -> str | None:
    """The key's generation in Redis, or None when Redis is away (memory is then trusted)."""
    if outage.redis_away():
        return None
    try:
        value = await client.get(limits.generation_key(key_id))
    except REDIS_DOWN:
        outage.mark_down()
        return None
    return value.decode() if isinstance(value, bytes) else "none"


_reconciling: set[asyncio.Task[Any]] = set()


async def reconcile_now() -> None:
    """Write what was counted while Redis was away, now (at shutdown: a restart loses none of it)."""
    if outage.has_backlog():
        client, _, _ = _client()
        await outage.reconcile(client, _settle)


def reconcile_if_due() -> None:
    """Called off the request path (the routes' watcher): Redis answers and a backlog waits."""
    if outage.has_backlog() and not outage.redis_away():
        _reconcile_soon()


def _reconcile_soon() -> None:
    """Redis answers again: put what this process counted meanwhile into it, off the request path."""
    if _reconciling:
        return

    async def run() -> None:
        client, _, _ = _client()
        try:
            written = await outage.reconcile(client, _settle)
            logger.warning(
                "Redis answers again: %d counts made while it was away were written to it", written
            )
        except Exception:
            outage.mark_down()
            logger.warning("could not yet write the usage counted while Redis was away; will retry")

    task = asyncio.get_running_loop().create_task(run())
    _reconciling.add(task)
    task.add_done_callback(_reconciling.discard)


def _admit_here(record: KeyRecord, *, reserve: int, source_ip: str | None, now: datetime) -> AsyncGrant:
    outcome = outage.admit(record, reserve=reserve, source_ip=source_ip, now=now)
    if isinstance(outcome, limits.OverLimit):
        raise over_limit(outcome, record)
    return AsyncGrant(
        record, outcome.slot, (), reserved=outcome.reserved, windows=outcome.windows, local=True
    )


async def authenticate(raw: str, *, kind: str, source_ip: str | None, reserve: int = 0) -> AsyncGrant:
    """Check a key and admit one request; `reserve` is the most tokens it may cost (held against the
    key's token limits until it settles). With Redis away, admits within keys.outage's limits."""
    digest, record, _ = await key_record(raw)
    return await admit(digest, record, kind=kind, source_ip=source_ip, reserve=reserve)


async def key_record(raw: str) -> tuple[str, KeyRecord, bool]:
    """The key a token names: its digest, its record, and whether this process had it in memory.
    An unknown or malformed token is refused (401)."""
    parsed = parse_or_refuse(raw)
    digest = tokens.digest(parsed.token, pepper())
    found, record = cache.get(digest)
    if not found:
        record = await _load(digest)
        cache.put(digest, record)
    if record is None:
        raise KeyRefused(401, "key_unknown", UNKNOWN)
    return digest, record, found


async def admit(
    digest: str, record: KeyRecord, *, kind: str, source_ip: str | None, reserve: int = 0
) -> AsyncGrant:
    """Admit one request of a known key: its state, then its limits in Redis (one EVALSHA)."""
    client, acquire_script, _ = _client()
    for _attempt in range(3):
        now = limits.now_utc()
        try:
            refuse_unusable(record, kind=kind, source_ip=source_ip, now=now)
        except KeyRefused:  # a refusal from memory is checked against the generation first
            current = await _generation(client, record.key_id)
            if current is None or current == record.generation:
                raise
            record = await _reload(digest, current)
            continue
        if outage.redis_away():
            return _admit_here(record, reserve=reserve, source_ip=source_ip, now=now)
        slot = os.urandom(16).hex()  # as unique as uuid4().hex, a fifth of its cost
        command = _acquire_command(record, slot=slot, source_ip=source_ip, reserve=reserve, now=now)
        try:
            reply = await _evalsha(client, acquire_script, command)
        except REDIS_DOWN:
            if outage.mark_down():
                logger.warning("Redis is not answering: admitting requests on this process's own limits")
            return _admit_here(record, reserve=reserve, source_ip=source_ip, now=now)
        if outage.has_backlog():
            _reconcile_soon()
        outcome = limits.acquire_outcome(record, reply, slot=slot, reserve=reserve)
        if isinstance(outcome, limits.Stale):
            record = await _reload(digest, outcome.generation)
            continue
        if isinstance(outcome, limits.OverLimit):
            outage.remember_refusal(record, outcome)
            raise over_limit(outcome, record)
        return AsyncGrant(
            record, outcome.slot, outcome.crossed, reserved=outcome.reserved, windows=outcome.windows
        )
    raise still_changing()
