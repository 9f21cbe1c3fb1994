"""The gateway charts' query on a large table: one topology's and one key's series per window.

Fills the bench database with ``--rows`` gateway records over the last 24 h (90 % for one topology,
the rest spread over others; 20 keys; 2 % fallback, 1 % refused, 0.5 % 5xx), once, then times
``gateway.selectors.gateway_series`` for 15 min, 1 h, 6 h and 24 h windows at the charts' default
step (best of 3), and prints the plan of the 1-hour query.

    .venv/bin/python bench/gateway_series.py [--rows 5000000] [--refill]

Environment: ``BENCH_DATABASE_URL`` (postgres://postgres@127.0.0.1:5432/tandem_bench_series, created
and migrated when missing), ``BENCH_REDIS_URL``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from telemetry_fanout import apply_env, ensure_database

KEY = "00000000-0000-0000-0000-0000000000{:02d}"
FILL = """
INSERT INTO gateway_gatewayrequest (created, key_id, model, topology_id, endpoint, backend, status,
    error_code, stream, prompt_tokens, completion_tokens, ttft_ms, latency_ms)
SELECT now() - (i * interval '86400 seconds') / %(rows)s,
       ('00000000-0000-0000-0000-0000000000' || lpad((i %% 20)::text, 2, '0'))::uuid,
       'bench/model',
       CASE WHEN i %% 10 = 0 THEN %(other)s ELSE %(main)s END,
       'chat/completions',
       CASE WHEN i %% 50 = 0 THEN 'fallback' WHEN i %% 97 = 0 THEN 'none' ELSE 'cluster' END,
       CASE WHEN i %% 97 = 0 THEN 401 WHEN i %% 211 = 0 THEN 502 ELSE 200 END,
       '', false, 100, 20, 5 + (i %% 37), 20 + (i %% 113)
FROM generate_series(1, %(rows)s) AS i
"""


def topology(name: str) -> int:
    from accounts.models import User
    from clusters.models import Cluster
    from topologies.models import Topology
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    admin, _ = User.objects.get_or_create(username="bench-series-admin", defaults={"role": "admin"})
    cluster = Cluster.objects.get_or_create(
        name="bench-series", defaults={"auth_method": "token", "server": "http://127.0.0.1:9"}
    )[0]
    found = Topology.objects.filter(cluster=cluster, name=name).first()
    if found is None:
        spec = preset_spec("qwen-gpu-nixl")
        spec.update(name=name)
        found = topology_create(cluster=cluster, spec=spec, actor=admin)
    return int(found.pk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--refill", action="store_true", help="delete the records and fill again")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tandem_bench_series")
    apply_env()
    ensure_database()
    import django

    django.setup()
    from django.db import connection

    from gateway import series
    from gateway.models import GatewayRequest
    from gateway.selectors import gateway_series

    main_id, other_id = topology("bench-series-main"), topology("bench-series-other")
    if args.refill:
        GatewayRequest.objects.all().delete()
    if GatewayRequest.objects.count() < args.rows:
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(FILL, {"rows": args.rows, "main": main_id, "other": other_id})
            cursor.execute("VACUUM ANALYZE gateway_gatewayrequest")
        print(f"filled {args.rows} records in {time.perf_counter() - started:.0f} s")
    now = time.time()
    print("window    step   topology: records  best of 3 | one key: records  time")
    for window in (900, 3600, 6 * 3600, 24 * 3600):
        step = series.auto_step(window)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            out = gateway_series(topology_id=main_id, start=now - window, end=now, step=step)
            best = min(best, time.perf_counter() - started)
        started = time.perf_counter()
        key = gateway_series(key_id=KEY.format(3), start=now - window, end=now, step=step)
        key_s = time.perf_counter() - started
        print(
            f"{window:>6} s {step:>5} s  {out['totals']['requests']:>16.0f} {1000 * best:8.1f} ms"
            f" | {key['totals']['requests']:>15.0f} {1000 * key_s:6.1f} ms"
        )
    from datetime import UTC, datetime

    from gateway.selectors import _SERIES_SQL

    sql = _SERIES_SQL.format(table="gateway_gatewayrequest", column="topology_id")
    first = series.first_bucket(now - 3600, 30)
    params = {
        "first": first,
        "step": 30,
        "q1": 0.5,
        "q2": 0.95,
        "owner": main_id,
        "since": datetime.fromtimestamp(first, tz=UTC),
        "until": datetime.fromtimestamp(now, tz=UTC),
    }
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        print("plan of the 1-hour query:\n  " + "\n  ".join(row[0] for row in cursor.fetchall()))


if __name__ == "__main__":
    main()
