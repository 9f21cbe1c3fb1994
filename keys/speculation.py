"""Speculative admission: a warm key's request goes upstream while Redis counts it.

For a key this process holds in memory, with Redis answering and no refusal of that key lately, the
gateway starts the upstream call at the same moment as the limit check (a :class:`Pending`) instead of
after it, and lets nothing of the answer reach the caller until the check admits the request. A
refusal cancels the upstream call and the caller gets the refusal, as without speculation. The
check's round trip to Redis so leaves the request's critical path; every request is still counted
before any of its answer is sent, and what the caller sees is the same.

What the cluster may see that it would not otherwise: the requests in flight at the moment a key first
goes over a limit (or is revoked), each cancelled within that round trip. After any refusal the key is
checked first again (no speculation) until the refused window resets, and for at least
:data:`HOLD_SECONDS`, so a client hammering a spent key reaches the cluster at most once per hold.
``GATEWAY_SPECULATIVE_ADMISSION=false`` turns it off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from keys import limits, outage
from keys.hotpath import KeyRefused, refuse_unusable
from keys.hotpath_async import AsyncGrant, admit, key_record
from keys.records import KeyRecord

HOLD_SECONDS = 60.0
_held_until: dict[str, float] = {}  # key id -> monotonic time its speculation may start again


@dataclass
class Pending:
    """A request whose limit check is to run beside its upstream call; ``grant`` starts the check (the
    caller starts the upstream call first) and raises KeyRefused on a refusal."""

    record: KeyRecord
    check: Coroutine[Any, Any, AsyncGrant]
    _started: asyncio.Future[AsyncGrant] | None = None

    @property
    def grant(self) -> asyncio.Future[AsyncGrant]:
        if self._started is None:
            self._started = asyncio.ensure_future(self.check)
        return self._started

    def cancel(self) -> None:
        """The request ended before the check answered: settle the grant when it comes."""
        self.grant.add_done_callback(_settle_orphan)


def _settle_orphan(future: asyncio.Future[AsyncGrant]) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    task = asyncio.ensure_future(future.result().settle())
    _orphans.add(task)
    task.add_done_callback(_orphans.discard)


_orphans: set[asyncio.Future[tuple[str, ...]]] = set()


def held(key_id: str, *, now: float | None = None) -> bool:
    """Whether a recent refusal keeps this key's requests waiting for their check."""
    until = _held_until.get(key_id)
    if until is None:
        return False
    if (time.monotonic() if now is None else now) < until:
        return True
    del _held_until[key_id]
    return False


def hold(key_id: str, refused: KeyRefused) -> None:
    """A refusal: no speculation for this key until its window resets, and at least HOLD_SECONDS."""
    seconds = max(HOLD_SECONDS, float(refused.retry_after or 0))
    _held_until[key_id] = time.monotonic() + seconds


async def admit_early(
    raw: str, *, kind: str, source_ip: str | None, reserve: int = 0
) -> AsyncGrant | Pending:
    """Admit a request, or start its check and return at once (a Pending) when it may be speculated."""
    digest, record, warm = await key_record(raw)
    if not (warm and settings.GATEWAY_SPECULATIVE_ADMISSION) or outage.redis_away() or held(record.key_id):
        return await _checked(digest, record, kind=kind, source_ip=source_ip, reserve=reserve)
    try:
        refuse_unusable(record, kind=kind, source_ip=source_ip, now=limits.now_utc())
    except KeyRefused:  # refused from memory: the full check decides (it looks at the generation)
        return await _checked(digest, record, kind=kind, source_ip=source_ip, reserve=reserve)
    return Pending(record, _checked(digest, record, kind=kind, source_ip=source_ip, reserve=reserve))


async def _checked(
    digest: str, record: KeyRecord, *, kind: str, source_ip: str | None, reserve: int
) -> AsyncGrant:
    try:
        return await admit(digest, record, kind=kind, source_ip=source_ip, reserve=reserve)
    except KeyRefused as refused:
        hold(record.key_id, refused)
        raise
