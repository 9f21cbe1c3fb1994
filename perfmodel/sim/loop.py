"""An asyncio event loop on a virtual clock: ``time()`` is simulated seconds, and waiting for the next
timer costs nothing (the clock jumps to it). Only timers drive it; it performs no network I/O."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Deadlock(RuntimeError):
    """Nothing is scheduled and nothing is ready, yet the simulation has not finished."""


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, loop: VirtualClockLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Deadlock("the simulation waits for an event that nothing will produce")
        if timeout > 0:
            self._loop.advance(timeout)
        return super().select(0)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self, start: float = 0.0) -> None:
        self._virtual = start
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self._virtual

    def advance(self, seconds: float) -> None:
        self._virtual += seconds


def run_virtual(coro: Coroutine[Any, Any, T], start: float = 0.0) -> T:
    """Run a coroutine to completion on a fresh virtual-clock loop."""
    loop = VirtualClockLoop(start)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
