"""Parallel test workers (pytest-xdist, ``make unit``): each worker gets a Redis database of its own.

The cache, the channel layer and the Celery broker all live on ``REDIS_URL``, and the tests start real
Celery workers and ASGI servers that take it from the environment; two pytest workers on one database
would consume each other's tasks and see each other's telemetry. Worker N of a run uses database
(base + 1 + N) mod 16 (the default server has 16), and channel-layer prefix ``<prefix>-gwN`` (pub/sub
messages cross databases); PostgreSQL needs nothing here, as pytest-django gives
each worker a test database of its own. Loaded with ``-p tests.parallel``, before Django reads its
settings; without xdist it changes nothing.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

DATABASES = 16


def worker_redis_url(url: str, worker: int) -> str:
    """``url`` with the database of worker number ``worker``; a unix-socket URL keeps its own (its
    database is a query parameter there, left as it is)."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url
    base = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(base + 1 + worker) % DATABASES}"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    number = int(worker[2:])
    os.environ["REDIS_URL"] = worker_redis_url(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), number
    )
    # Redis pub/sub ignores the database: the channel layer's groups need a prefix of the worker's own.
    os.environ["CHANNEL_PREFIX"] = f"{os.environ.get('CHANNEL_PREFIX', 'tandem')}-{worker}"
