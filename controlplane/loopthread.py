"""One asyncio loop per process, in a daemon thread, for sync code that runs coroutines often.

``async_to_sync`` starts an event loop for every call, and whatever the coroutine connects to (a
Redis pool of the channel layer, an HTTP session) is made again on that loop each time. A loop that
lives as long as the process keeps them. It starts on first use and again in a forked child (a
Celery prefork worker inherits the parent's objects, not its threads).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(
        self,
        name: str,
        *,
        new_loop: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self._name = name
        self._new_loop = new_loop
        self._on_start = on_start  # reset what belonged to an earlier loop (called under the lock)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop of this process, started if there is none."""
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or not self._loop.is_running():
                loop = self._new_loop()
                running = threading.Event()
                loop.call_soon(running.set)
                threading.Thread(target=loop.run_forever, name=self._name, daemon=True).start()
                running.wait(5)
                self._loop, self._pid = loop, os.getpid()
                if self._on_start is not None:
                    self._on_start()
            return self._loop

    def current(self) -> asyncio.AbstractEventLoop | None:
        """The loop if it runs in this process, without starting one."""
        with self._lock:
            if self._loop is not None and self._pid == os.getpid() and self._loop.is_running():
                return self._loop
            return None

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop())

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and wait for it; on a timeout it is cancelled."""
        future = self.submit(coroutine)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
