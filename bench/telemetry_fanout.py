"""Websocket fan-out: N signed-in clients on /ws/overview/ while one update per second is published.

Starts the ASGI app (uvicorn, one process) on a bench database, connects N websocket clients with a
viewer's session cookie, publishes through the real channel layer (channels-redis) exactly as the
collection task does, and prints delivery latency (publish → every client's receive) and the server's
CPU and memory. Target: p99 < 250 ms at 500 clients and 1 update/s.

    .venv/bin/python bench/telemetry_fanout.py [--clients 500] [--seconds 30] [--rate 1] [--layer both]
    .venv/bin/python bench/telemetry_fanout.py --layer-only   # the channel layer alone, no websockets

Environment (defaults suit a developer machine with local PostgreSQL and Redis):
``BENCH_DATABASE_URL`` (postgres://postgres@127.0.0.1:5432/tandem_bench, created and migrated when
missing), ``BENCH_REDIS_URL`` (redis://127.0.0.1:6379/10). ``bench/telemetry_freshness.py`` reuses the
server plumbing below.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parent.parent


def bench_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tandem_bench"),
        REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/10"),
        SECRET_KEY="bench-secret-key-not-for-production-0123456789abcdef",
        FIELD_ENCRYPTION_KEYS="qx7dD0H3ZxKdbMgFq3aXNd7R5lOqdRkk2m8Wq1fW0cM=",
        TANDEM_HTTPS="false",
        DEBUG="false",
        LOG_LEVEL="warning",
        DJANGO_SETTINGS_MODULE="controlplane.settings",
        CHANNEL_PREFIX="tandem-bench",
    )
    env.update(extra)
    return env


def apply_env(**extra: str) -> None:
    os.environ.update(bench_env(**extra))
    sys.path.insert(0, str(ROOT))


def ensure_database() -> None:
    """Create the bench database when missing and migrate it."""
    import psycopg

    url = urlparse(os.environ["DATABASE_URL"])
    name = url.path.lstrip("/")
    admin = url._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        check=True,
        env=dict(os.environ),
    )


def session_cookie(username: str = "bench-viewer", role: str = "viewer") -> str:
    """A Django session cookie value for a user of `role` (created when missing)."""
    import django

    django.setup()
    from django.test import Client

    from accounts.models import User

    user, _ = User.objects.get_or_create(username=username, defaults={"role": role})
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Uvicorn:
    """The ASGI app in a uvicorn subprocess on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Uvicorn:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "controlplane.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            cwd=ROOT,
            env=dict(os.environ),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urlopen(self.base + "/healthz", timeout=1) as response:  # noqa: S310 - loopback only
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("uvicorn did not answer /healthz within 30 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class ProcStats:
    """CPU seconds and resident memory of one process, from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ticks = os.sysconf("SC_CLK_TCK")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.ticks

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def run(clients: int, seconds: float, rate: float) -> None:
    import websockets
    from channels.layers import get_channel_layer

    from controlplane.broadcast import overview_group

    cookie = await asyncio.to_thread(session_cookie)
    with Uvicorn() as server:
        assert server.proc is not None
        stats = ProcStats(server.proc.pid)
        url = f"ws://127.0.0.1:{server.port}/ws/overview/"
        headers = {"Cookie": f"sessionid={cookie}", "Origin": server.base}
        latencies: list[float] = []
        by_update: dict[int, list[float]] = {}
        connect_started = time.perf_counter()

        async def read(ws) -> None:  # type: ignore[no-untyped-def]
            async for raw in ws:
                now = time.time()
                if '"bench_sent"' in raw:
                    message = json.loads(raw)
                    latencies.append(now - message["bench_sent"])
                    by_update.setdefault(message["seq"], []).append(now - message["bench_sent"])

        sockets = []
        for first in range(0, clients, 25):  # a steady ramp: 25 handshakes at a time
            batch = min(25, clients - first)
            sockets += await asyncio.gather(
                *(
                    websockets.connect(url, additional_headers=headers, max_queue=None, open_timeout=60)
                    for _ in range(batch)
                )
            )
        tasks = [asyncio.create_task(read(ws)) for ws in sockets]
        connect_s = time.perf_counter() - connect_started
        await asyncio.sleep(1.0)
        layer = get_channel_layer()
        assert layer is not None
        rss_idle = stats.rss_mb()
        cpu0, wall0 = stats.cpu_seconds(), time.perf_counter()
        me = ProcStats(os.getpid())
        client_cpu0 = me.cpu_seconds()
        sent = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            due = start + sent / rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            payload = {
                "kind": "overview",
                "topology_id": 0,
                "bench_sent": time.time(),
                "seq": sent,
                "health": {"state": "healthy", "reasons": []},
                "slo": {"state": "ok"},
                "hit_rate": 0.5,
                "ttft_p95": 0.12,
            }
            await layer.group_send(overview_group(), {"type": "broadcast.event", "payload": payload})
            sent += 1
        await asyncio.sleep(2.0)
        cpu1, wall1 = stats.cpu_seconds(), time.perf_counter()
        client_cpu = me.cpu_seconds() - client_cpu0
        rss_busy = stats.rss_mb()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)

    expected = sent * clients
    ms = [v * 1000 for v in latencies]
    print(
        f"websocket fan-out ({os.environ['CHANNEL_LAYER']} channel layer): {clients} clients, "
        f"{sent} updates at {rate:g}/s over {seconds:g} s"
    )
    print(f"  connect all clients      {connect_s:8.2f} s")
    print(f"  delivered                {len(ms):8d} / {expected} ({100 * len(ms) / max(1, expected):.2f} %)")
    print(f"  latency p50              {quantile(ms, 0.50):8.1f} ms")
    print(f"  latency p95              {quantile(ms, 0.95):8.1f} ms")
    print(f"  latency p99              {quantile(ms, 0.99):8.1f} ms   (target < 250 ms)")
    print(f"  latency max              {max(ms) if ms else float('nan'):8.1f} ms")
    if os.environ.get("BENCH_VERBOSE"):
        for seq, values in sorted(by_update.items()):
            print(f"  update {seq:3d}: min {1000 * min(values):7.1f}  max {1000 * max(values):7.1f} ms")
    print(f"  server CPU               {100 * (cpu1 - cpu0) / (wall1 - wall0):8.1f} % of one core")
    print(f"  client CPU (this proc)   {100 * client_cpu / (wall1 - wall0):8.1f} % of one core")
    print(f"  server RSS idle / busy   {rss_idle:8.1f} / {rss_busy:.1f} MB")


async def run_layer_only(clients: int, seconds: float, rate: float) -> None:
    """The channel layer alone: N channels of one process in a group, no websockets, no server."""
    from channels.layers import get_channel_layer

    from controlplane.broadcast import overview_group

    layer = get_channel_layer()
    assert layer is not None
    group = overview_group() + ".bench"
    channels = [await layer.new_channel() for _ in range(clients)]
    for channel in channels:
        await layer.group_add(group, channel)
    latencies: list[float] = []

    async def receive(channel: str) -> None:
        while True:
            message = await layer.receive(channel)
            latencies.append(time.time() - message["sent"])

    tasks = [asyncio.create_task(receive(channel)) for channel in channels]
    await asyncio.sleep(0.5)
    updates = max(1, int(seconds * rate))
    for _ in range(updates):
        await layer.group_send(group, {"type": "bench.event", "sent": time.time()})
        await asyncio.sleep(1 / rate)
    await asyncio.sleep(1.0)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await layer.group_discard(group, channel)
    ms = [v * 1000 for v in latencies]
    print(
        f"channel layer only ({os.environ['CHANNEL_LAYER']}): {clients} channels in one process, "
        f"{updates} updates: delivered {len(ms)}/{updates * clients}, "
        f"p50 {quantile(ms, 0.5):.1f} ms, p99 {quantile(ms, 0.99):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1.0, help="updates per second")
    parser.add_argument(
        "--layer", choices=("pubsub", "core", "both"), default="both", help="channel layer (CHANNEL_LAYER)"
    )
    parser.add_argument(
        "--layer-only", action="store_true", help="measure the channel layer alone (no server, no websockets)"
    )
    args = parser.parse_args()
    if args.layer == "both":  # each layer in a fresh process: settings are read once per process
        for layer in ("pubsub", "core"):
            argv = [f"--clients={args.clients}", f"--seconds={args.seconds}", f"--rate={args.rate}"]
            argv += ["--layer-only"] if args.layer_only else []
            subprocess.run([sys.executable, __file__, *argv, f"--layer={layer}"], check=True)
        return
    apply_env(CHANNEL_LAYER=args.layer)
    ensure_database()
    import django

    django.setup()
    if args.layer_only:
        asyncio.run(run_layer_only(args.clients, args.seconds, args.rate))
        return
    asyncio.run(run(args.clients, args.seconds, args.rate))


if __name__ == "__main__":
    main()
