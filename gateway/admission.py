"""A gateway request's admission: its key's check, and the upstream call that may start beside it.

A warm key's request is speculated (keys.speculation): its upstream call starts while Redis counts it,
through a ``send`` that holds every message until the check admits the request. A refusal, or any
failure of the check, cancels the upstream call before a byte of its answer reached the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gateway import key_events
from gateway.errors import GatewayError
from keys.hotpath import KeyRefused
from keys.hotpath_async import AsyncGrant
from keys.speculation import Pending

Send = Callable[[dict[str, Any]], Awaitable[None]]
T = TypeVar("T")


def refusal(error: KeyRefused) -> GatewayError:
    headers = {"retry-after": str(error.retry_after)} if error.retry_after else {}
    code = error.code
    limit = error.detail if error.status == 429 and error.detail else None
    if limit and str(limit.get("name", "")).endswith(("_day", "_month")):
        code = "insufficient_quota"
    return GatewayError(error.status, code, error.message, headers=headers, limit=limit)


async def admitted(check: Awaitable[T], *, source_ip: str | None, path: str, token: str) -> T:
    """The check's answer; a refusal is recorded against the caller and raised as the gateway's error."""
    try:
        return await check
    except KeyRefused as refused:
        key_events.record_auth_failure(refused, source_ip=source_ip, path=path, token=token)
        raise refusal(refused) from None


def gated(send: Send, gate: asyncio.Future[None]) -> Send:
    """`send` that waits for the gate before the first message goes out."""

    async def held(message: dict[str, Any]) -> None:
        if not gate.done():
            await gate
        await send(message)

    return held


async def speculate(
    admission: Pending,
    start: Callable[[Send], Awaitable[None]],
    send: Send,
    *,
    source_ip: str | None,
    path: str,
    token: str,
) -> tuple[AsyncGrant, asyncio.Future[None], Callable[[], None]]:
    """Start the request's work now and wait for its check: the grant, the running work, and the call
    that lets the work's messages out (the caller checks the grant's record first, when it changed)."""
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    work = asyncio.ensure_future(start(gated(send, gate)))
    try:
        grant = await admitted(admission.grant, source_ip=source_ip, path=path, token=token)
    except BaseException:
        await stop(work)
        if not admission.grant.done():
            admission.cancel()
        raise
    return grant, work, lambda: gate.set_result(None)


async def stop(work: asyncio.Future[None]) -> None:
    """Cancel work started for a request that is not to be answered, and wait until it ended."""
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
