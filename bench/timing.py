"""Shared set-up and timing helpers for the benchmark scripts in this folder."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def configure_django(default_database_url: str) -> None:
    """Point Django at a scratch database (BENCH_DATABASE_URL/BENCH_REDIS_URL override) and set it up."""
    os.environ.update(
        DATABASE_URL=os.environ.get("BENCH_DATABASE_URL", default_database_url),
        REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"),
        SECRET_KEY="bench-secret-key-not-for-production-0123456789abcdef",
        FIELD_ENCRYPTION_KEYS="qx7dD0H3ZxKdbMgFq3aXNd7R5lOqdRkk2m8Wq1fW0cM=",
        TANDEM_HTTPS="false",
        LOG_LEVEL="warning",
        DJANGO_SETTINGS_MODULE="controlplane.settings",
    )
    import django

    django.setup()


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    """Wall time of each of `runs` calls, in milliseconds."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def report(label: str, samples: list[float], *, width: int = 42, decimals: int = 1) -> None:
    median, worst = statistics.median(samples), max(samples)
    print(f"  {label:<{width}} median {median:8.{decimals}f} ms   max {worst:8.{decimals}f} ms")
