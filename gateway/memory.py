"""Give the memory of a passed spike back to the operating system.

A stalled upstream holds every request that arrives until its first-byte timeout: at 100 req/s and a 5 s
timeout, 500 requests with their buffers, tasks and connections. When they end, CPython frees their
objects, but glibc keeps most of the freed heap mapped (fragmented, above the top of the heap), so the
gateway's resident memory stays at the spike's high-water mark long after it has passed. glibc's
``malloc_trim(0)`` returns those free pages.

The gateway counts the requests in flight; once a spike of at least ``SPIKE`` requests has fallen to a
quarter of its peak, the next check (every ``CHECK_SECONDS``) trims once, in a thread (ctypes releases
the GIL; only allocations made during the trim wait for it). In steady traffic nothing is trimmed, so the
request path pays nothing but two integer updates. Where the C library has no ``malloc_trim`` (musl,
macOS) this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

SPIKE = 64  # requests in flight at once that make a spike worth trimming after
CHECK_SECONDS = 10.0


def _libc_trim() -> Callable[[], object] | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


@dataclass
class Spikes:
    """Requests in flight, and the peak since the last trim (pure)."""

    in_flight: int = 0
    peak: int = 0

    def enter(self) -> None:
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight

    def leave(self) -> None:
        self.in_flight -= 1

    def passed(self) -> bool:
        """A spike of at least SPIKE requests has fallen to a quarter of its peak."""
        return self.peak >= SPIKE and self.in_flight * 4 <= self.peak

    def trimmed(self) -> None:
        self.peak = self.in_flight


spikes = Spikes()
_trim = _libc_trim()
_task: asyncio.Task[None] | None = None


async def _watch() -> None:
    while True:
        await asyncio.sleep(CHECK_SECONDS)
        if spikes.passed() and _trim is not None:
            peak = spikes.peak
            spikes.trimmed()
            await asyncio.to_thread(_trim)
            logger.info("gateway memory trimmed after a spike of %d requests in flight", peak)


def start() -> None:
    """Start the watch (once per process, from the ASGI lifespan's startup)."""
    global _task
    if _task is None and _trim is not None:
        _task = asyncio.get_running_loop().create_task(_watch())
