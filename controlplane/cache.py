"""The Django cache on Redis, with a short memory of failure.

Every Redis socket has a deadline (``REDIS_CONNECT_TIMEOUT_SECONDS``, ``REDIS_SOCKET_TIMEOUT_SECONDS``), so a
hung Redis costs one call at most that long. After a failure, the process skips Redis for
``REDIS_RETRY_SECONDS`` and fails at once, so a page that makes several cache calls does not wait out the
deadline on each. Callers decide what a failure means: telemetry snapshots fail open (the page renders
without live figures), login lockout fails closed (see ``controlplane.middleware``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.core.cache.backends.redis import RedisCache
from django.utils.functional import cached_property


class RedisBreaker:
    """Per-process: open for a few seconds after a Redis error; calls made meanwhile fail immediately."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open_until = 0.0
        self._last_error = ""

    def check(self) -> None:
        if time.monotonic() < self._open_until:
            raise redis.ConnectionError(
                f"Redis did not answer moments ago ({self._last_error}); not retried yet"
            )

    def trip(self, error: BaseException) -> None:
        seconds = float(getattr(settings, "REDIS_RETRY_SECONDS", 3.0))
        with self._lock:
            self._open_until = time.monotonic() + seconds
            self._last_error = str(error) or error.__class__.__name__

    def reset(self) -> None:
        with self._lock:
            self._open_until = 0.0


breaker = RedisBreaker()


class _GuardedClient:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            breaker.check()
            try:
                return attr(*args, **kwargs)
            except (redis.ConnectionError, redis.TimeoutError) as error:  # unreachable, not a bad command
                breaker.trip(error)
                raise

        return _named(call, name)


def _named(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    function.__name__ = name
    return function


class GuardedRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> Any:
        base: Any = RedisCache.__dict__["_cache"]
        return _GuardedClient(base.func(self))
