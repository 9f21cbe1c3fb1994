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
from pathlib import Path
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


# The modules that take longest, heaviest first (seconds of one worker, measured with --durations=0 and
# summed per module by `python -m tests.module_weights`). xdist's loadfile hands out modules in the
# order collected (with --no-loadscope-reorder; its default puts modules with the most tests first,
# which leaves the slowest few-test modules for last and one worker waiting on them). Starting with the
# longest ones and ending with many short ones lets both workers finish together.
WEIGHTS = Path(__file__).with_name("module_weights.txt")


def module_weights(path: Path = WEIGHTS) -> dict[str, float]:
    weights: dict[str, float] = {}
    for line in path.read_text().splitlines():
        seconds, _, module = line.partition(" ")
        if module and not line.startswith("#"):
            weights[module.strip()] = float(seconds)
    return weights


def heaviest_first(items: list[pytest.Item], weights: dict[str, float]) -> list[pytest.Item]:
    """The items with their modules reordered by weight (heaviest first; unlisted modules after, in
    their own order); the tests of one module keep their order."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    order = sorted(modules, key=lambda module: -weights.get(module, 0.0))  # stable: unlisted keep order
    return [item for module in order for item in modules[module]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if WEIGHTS.exists():
        items[:] = heaviest_first(items, module_weights())
