"""A stream the client cuts off: the work stops at once, and the tokens already sent are charged.

While a stream is relayed, the client's ``http.disconnect`` is watched beside it; when it comes first,
the relay is cancelled (which closes the upstream connection, so the engine stops generating), and the
request is recorded as cancelled by the client (status 499, ``client_cancelled``) with the tokens sent
so far: the usage the upstream reported, else the prompt estimated from the request's size and one
token per chunk relayed (engines stream a token a chunk).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.outcome import Outcome
from gateway.tokencount import CHARS_PER_TOKEN

Receive = Callable[[], Awaitable[dict[str, Any]]]
STATUS, CODE = 499, "client_cancelled"


class ClientCancelled(Exception):
    """The client went away before the stream ended."""


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_disconnect(work: Awaitable[None], receive: Receive) -> None:
    """Run `work`; if the client disconnects first, cancel it and raise ClientCancelled."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done() and not watcher.done():  # we were cancelled ourselves
            task.cancel()
        if not watcher.done():
            watcher.cancel()
    if task.done():
        task.result()
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise ClientCancelled


def charge_cut(outcome: Outcome, *, body_bytes: int) -> None:
    """Record a cut stream as cancelled by the client, charged what was sent."""
    outcome.status = STATUS
    outcome.error_code = CODE
    if not outcome.prompt_tokens:
        outcome.prompt_tokens = max(1, body_bytes // CHARS_PER_TOKEN)
    if not outcome.completion_tokens:
        outcome.completion_tokens = outcome.streamed_chunks
