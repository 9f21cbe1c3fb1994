"""The engine's clock: the running event loop's time.

In the sandbox's engines that is asyncio's default, ``time.monotonic()``; the virtual-clock simulator
(``perfmodel.sim``) runs the same scheduler and KV-transfer code on a loop whose time jumps from one
event to the next, so simulated seconds cost no wall-clock time. Outside a loop (tests poking an
engine from synchronous code) it falls back to ``time.monotonic()``.
"""

from __future__ import annotations

import asyncio
import time


def now() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()
