"""What the gateway makes once, at start-up, rather than on the request that first needs it.

A fallback is used first when a cluster fails: that request should not also pay for (and the process
not grow by) what failing over needs the first time: the pooled client and its connector on the
serving loop, the channel layer on which the breaker's changes are announced, and the worker threads
the records, breaker changes and kept traces are written from (with their connections to the
database and Redis), which a failover, keeping every request's trace, needs several of at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from gateway import upstream

logger = logging.getLogger(__name__)
THREADS = 4  # the loop's worker threads: the writers of records, breaker changes and kept traces


def _ready(barrier: threading.Barrier) -> None:
    """In a worker thread: its connections to the database and Redis opened, then wait for the others
    (so that each thread of the pool runs one of these). Best effort: the gateway starts, and serves,
    without Redis, and a database that is away now is connected to later."""
    from django.db import close_old_connections, connection

    from keys import limits

    try:
        close_old_connections()
        connection.ensure_connection()
        limits.client().ping()
    except Exception as error:
        logger.warning("gateway start-up: a worker thread could not connect yet (%s)", error)
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(10)


async def prepare() -> None:
    """On the serving loop, before the first request (the ASGI lifespan's start-up). The threads are
    started here; their connections open in the background (start-up does not wait on them)."""
    from controlplane import broadcast

    loop = asyncio.get_running_loop()
    upstream.session()
    broadcast.start()
    executor = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="gateway-writer")
    loop.set_default_executor(executor)
    barrier = threading.Barrier(THREADS)
    for _ in range(THREADS):  # each submitted before any is done: the pool starts a thread for each
        executor.submit(_ready, barrier)
