"""Writes that need Redis (they enqueue Celery work) check it first, so they fail fast and leave nothing.

A deploy or scale writes rows and then enqueues a task. When Redis (the broker) does not answer, the
request must not commit rows that no worker will run while telling the client it failed: the check below
runs inside the service's transaction, before anything is written, and raises a 503 naming Redis.
"""

from __future__ import annotations

import redis
from django.conf import settings
from rest_framework import status

from controlplane.api.errors import DomainError


class RedisUnavailable(DomainError):
    status_code: int = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "redis_unavailable"


def redis_unavailable_message(what: str, error: BaseException | str) -> str:
    return (
        f"Redis does not answer ({error}), so {what}; nothing was saved. "
        "Try again once Redis is back (/readyz shows its state)."
    )


def require_broker(*, what: str) -> None:
    """Raise RedisUnavailable unless the Celery broker answers a PING within the Redis deadlines."""
    url = str(getattr(settings, "CELERY_BROKER_URL", "") or settings.REDIS_URL)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return  # an in-memory broker (tests, tools): nothing to ask
    client = redis.Redis.from_url(
        url,
        socket_connect_timeout=float(getattr(settings, "REDIS_CONNECT_TIMEOUT_SECONDS", 1.0)),
        socket_timeout=float(getattr(settings, "REDIS_SOCKET_TIMEOUT_SECONDS", 1.0)),
    )
    try:
        client.ping()
    except redis.RedisError as error:
        raise RedisUnavailable(
            redis_unavailable_message(what, error),
            fields={"redis": ["the task queue (Redis) is unavailable; retry when /readyz reports it ok"]},
        ) from None
    finally:
        client.close()
