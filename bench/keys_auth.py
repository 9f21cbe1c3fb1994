"""What an API key costs per request, with 10,000 keys stored.

Stores N keys (bulk-inserted rows with real HMAC digests), then prints p50/p99 of: the token's format
and checksum check, its digest, the limit check alone (one EVALSHA, plus the release of the concurrency
slot), authentication plus limit check through ``keys.hotpath`` cached and uncached (the sample's key
dropped from the in-process cache first), and whole requests to ``/api/v1/me/`` through Django's test client:
without credentials, with a session, and with a key (cached and uncached). Target: cached
authentication + limit check p99 < 1 ms. Every sample picks a random stored key; the cases are
sampled round-robin so that other work on the machine weighs on all of them alike.

    .venv/bin/python bench/keys_auth.py [--keys 10000] [--samples 5000] [--profile]

Environment: ``BENCH_DATABASE_URL`` (postgres://postgres@127.0.0.1:5432/tandem_bench_keys, created
and migrated when missing), ``BENCH_REDIS_URL`` (redis://127.0.0.1:6379/7).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from timing import configure_django  # noqa: E402

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/tandem_bench_keys"
ME = "/api/v1/me/"


def ensure_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    with psycopg.connect(parsed._replace(path="/postgres").geturl(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def store_keys(count: int) -> tuple[Any, list[str]]:
    """`count` management keys of one operator, inserted in bulk; returns the user and the secrets."""
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from accounts.models import User
    from keys import tokens
    from keys.models import ApiKey, ApiKeySecret

    user, _ = User.objects.get_or_create(username="bench-keys", defaults={"role": "operator"})
    ApiKey.objects.filter(owner=user).delete()
    expires = timezone.now() + timedelta(days=30)
    secrets = [tokens.generate("management") for _ in range(count)]
    rows = [
        ApiKey(
            name=f"bench-{i}",
            purpose="automation",
            kind="management",
            owner=user,
            scopes=["topologies:read", "keys:read"],
            requests_per_minute=10**9,
            max_concurrent=10**6,
            requests_per_day=10**12,
            requests_per_month=10**12,
            alert_thresholds=[80, 95],
            expires_at=expires,
            created_by=user,
        )
        for i in range(count)
    ]
    with transaction.atomic():
        ApiKey.objects.bulk_create(rows, batch_size=2000)
        ApiKeySecret.objects.bulk_create(
            [
                ApiKeySecret(
                    key=row,
                    digest=tokens.digest(secret, settings.API_KEY_PEPPER),
                    display_prefix=secret[: tokens.DISPLAY_PREFIX_LENGTH],
                    last4=secret[-4:],
                )
                for row, secret in zip(rows, secrets, strict=True)
            ],
            batch_size=2000,
        )
    return user, secrets


class Samples(list[float]):
    """Wall times in ms, and this process's CPU time per call (robust when other work shares the cores)."""

    cpu_ms: float = 0.0


Case = tuple[
    str, Callable[[], object], Callable[[], object] | None, int
]  # label, call, untimed set-up, every


def interleaved(cases: list[Case], rounds: int) -> dict[str, Samples]:
    """Round-robin samples of several cases, so a burst of other work on the machine hits them alike.

    Each case runs once per round (or every `every`-th round); its set-up runs untimed before each call."""
    samples = {label: Samples() for label, *_ in cases}
    cpu = dict.fromkeys(samples, 0.0)
    for round_ in range(rounds):
        for label, call, before, every in cases:
            if round_ % every:
                continue
            if before is not None:
                before()
            cpu_started = time.process_time()
            started = time.perf_counter()
            call()
            samples[label].append((time.perf_counter() - started) * 1000)
            cpu[label] += time.process_time() - cpu_started
    for label, taken in samples.items():
        taken.cpu_ms = cpu[label] * 1000 / len(taken)
    return samples


def percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples), cuts[98]


HEADER = f"{'p50 ms':>8} {'p99 ms':>8} {'CPU ms':>8}"


def row(label: str, samples: Samples, baseline: float | None = None) -> float:
    p50, p99 = percentiles(samples)
    extra = f"   {p50 - baseline:+7.3f} ms ({p50 / baseline:4.1f}x)" if baseline else ""
    print(f"  {label:<44} {p50:8.3f} {p99:8.3f} {samples.cpu_ms:8.3f}{extra}")
    return p50


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=5_000)
    parser.add_argument("--profile", action="store_true", help="cProfile the cached path and print the top")
    args = parser.parse_args()
    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE)
    ensure_database(url)
    os.environ["BENCH_DATABASE_URL"] = url
    configure_django(url)
    import logging

    logging.getLogger("django.request").setLevel(logging.ERROR)  # one "Unauthorized" line per sample

    from django.core.management import call_command
    from django.test import Client

    from keys import hotpath, limits, tokens

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    user, secrets = store_keys(args.keys)
    print(
        f"{args.keys} keys stored in {time.perf_counter() - started:.1f} s; {args.samples} rounds in process "
        f"(uncached: every 5th), {max(500, args.samples // 5)} rounds of requests (uncached: every 2nd)"
    )
    pick = random.Random(8).choice
    ip = "127.0.0.1"

    def auth_and_settle() -> None:
        hotpath.authenticate(pick(secrets), kind="management", source_ip=ip).settle()

    chosen: list[str] = []

    def evict_one() -> None:
        """Pick the next sample's key and drop it alone from the cache (the other keys stay cached)."""
        secret = pick(secrets)
        hotpath.cache._entries.pop(tokens.digest(secret, hotpath.pepper()), None)
        chosen[:] = [secret]

    def auth_and_settle_evicted() -> None:
        hotpath.authenticate(chosen[0], kind="management", source_ip=ip).settle()

    # Warm every key into the in-process cache (and the connection, the script cache, the query plans).
    for secret in secrets:
        hotpath.authenticate(secret, kind="management", source_ip=ip).settle()
    record = hotpath.lookup(secrets[0])
    assert record is not None

    def limit_check() -> None:
        outcome = limits.acquire(record, slot="bench", source_ip=ip)
        assert isinstance(outcome, limits.Acquired)
        limits.settle(record, slot=outcome.slot)

    pepper = hotpath.pepper()
    runs = args.samples
    redis = limits.client()
    cases: list[Case] = [
        ("Redis round trip (PING), for reference", redis.ping, None, 1),
        ("format + checksum (tokens.parse)", lambda: tokens.parse(pick(secrets)), None, 1),
        ("digest (HMAC-SHA256 with pepper)", lambda: tokens.digest(pick(secrets), pepper), None, 1),
        ("limit check alone (acquire + settle)", limit_check, None, 1),
        (
            "authenticate, cached (no settle)",
            lambda: hotpath.authenticate(pick(secrets), kind="management", source_ip=ip),
            None,
            1,
        ),
        ("authenticate + limit check, cached", auth_and_settle, None, 1),
        ("authenticate + limit check, uncached", auth_and_settle_evicted, evict_one, 5),
    ]
    results = interleaved(cases, runs)
    print(f"  {'per request (in process)':<44} {HEADER}")
    for label, taken in results.items():
        row(label, taken)
    cached = results["authenticate + limit check, cached"]

    client = Client(HTTP_HOST="127.0.0.1")
    session = Client(HTTP_HOST="127.0.0.1")
    session.force_login(user)

    def with_key() -> object:
        return client.get(ME, HTTP_AUTHORIZATION=f"Bearer {pick(secrets)}")

    def with_evicted_key() -> object:
        return client.get(ME, HTTP_AUTHORIZATION=f"Bearer {chosen[0]}")

    http_cases: list[Case] = [
        ("no credentials (401, no auth work)", lambda: client.get(ME), None, 1),
        ("session", lambda: session.get(ME), None, 1),
        ("key, cached", with_key, None, 1),
        ("key, uncached", with_evicted_key, evict_one, 2),
    ]
    interleaved(http_cases, 50)  # warm up
    http_results = interleaved(http_cases, max(500, runs // 5))
    print(f"  {'GET /api/v1/me/ (Django test client)':<44} {HEADER}   p50 vs no auth")
    base = 0.0
    for label, taken in http_results.items():
        p50 = row(label, taken, base or None)
        base = base or p50

    p99 = percentiles(cached)[1]
    verdict = "meets" if p99 < 1.0 else "MISSES"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"cached authentication + limit check p99 {p99:.3f} ms: {verdict} the 1 ms target")
    print(f"load average during the run: {load} on {os.cpu_count()} cores (p99 reflects other work there)")

    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(runs):
            auth_and_settle()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    forget_counters()
    return 0


def forget_counters() -> None:
    """Drop the run's counters from Redis (each run stores new keys)."""
    from keys import limits

    r = limits.client()
    batch = []
    for name in r.scan_iter(match=limits.counter_key("*", "*", "*").split("*")[0] + "*", count=1000):
        batch.append(name)
        if len(batch) >= 1000:
            r.delete(*batch)
            batch = []
    if batch:
        r.delete(*batch)


if __name__ == "__main__":
    raise SystemExit(main())
