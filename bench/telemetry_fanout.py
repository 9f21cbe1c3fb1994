"""Websocket fan-out: N signed-in clients on /ws/overview/ while one update per second is published.

Starts the ASGI app (uvicorn; one process unless --server-processes) on a bench database, connects N
websocket clients with a viewer's session cookie from several client processes (so the clients are
never the bottleneck: their CPU is printed too), publishes through the real channel layer
(channels-redis) exactly as the collection task does, and prints delivery latency (the publisher's
clock at group_send → each client's clock at receive; same machine) and the server's CPU and memory.
Target: p99 < 250 ms at 500 clients and 1 update/s.

    .venv/bin/python bench/telemetry_fanout.py [--clients 500] [--seconds 30] [--rate 1] [--layer both]
        [--ws auto|websockets|websockets-sansio|wsproto|all] [--processes 4] [--server-processes 1]
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
WS_IMPLEMENTATIONS = ("websockets", "websockets-sansio", "wsproto")


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

    def __init__(self, ws: str = "auto", workers: int = 1, deflate: bool = True) -> None:
        self.port = free_port()
        self.ws = ws
        self.workers = workers
        self.deflate = deflate
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
                "--ws",
                self.ws,
                *(["--workers", str(self.workers)] if self.workers > 1 else []),
                *([] if self.deflate else ["--ws-per-message-deflate", "false"]),
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
    """CPU seconds and resident memory of one process (with its child processes: uvicorn's
    workers), from /proc."""

    def __init__(self, pid: int, *, children: bool = False) -> None:
        self.pid = pid
        self.children = children
        self.ticks = os.sysconf("SC_CLK_TCK")

    def pids(self) -> list[int]:
        found = [self.pid]
        if not self.children:
            return found
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            children = (task / "children").read_text().split()
            found += [int(child) for child in children]
        return found

    def cpu_seconds(self) -> float:
        total = 0
        for pid in self.pids():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / self.ticks

    def rss_mb(self) -> float:
        total = 0
        for pid in self.pids():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        return total / 1024


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def client_worker(count: int, url: str, origin: str) -> None:
    """One client process: `count` websockets; prints "ready", then (when stdin closes) its
    latencies as JSON. Latency = this process's receive time - the publisher's send time."""
    import websockets

    headers = {"Cookie": f"sessionid={os.environ['BENCH_WS_COOKIE']}", "Origin": origin}
    latencies: list[float] = []

    async def read(ws) -> None:  # type: ignore[no-untyped-def]
        async for raw in ws:
            now = time.time()
            if '"bench_sent"' in raw:
                latencies.append(now - json.loads(raw)["bench_sent"])

    sockets = []
    for first in range(0, count, 25):  # a steady ramp: 25 handshakes at a time
        batch = min(25, count - first)
        sockets += await asyncio.gather(
            *(
                websockets.connect(url, additional_headers=headers, max_queue=None, open_timeout=60)
                for _ in range(batch)
            )
        )
    tasks = [asyncio.create_task(read(ws)) for ws in sockets]
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    print(json.dumps(latencies), flush=True)


async def run(
    clients: int, seconds: float, rate: float, processes: int, ws: str, servers: int, deflate: bool
) -> None:
    from channels.layers import get_channel_layer

    from controlplane.broadcast import overview_group

    cookie = await asyncio.to_thread(session_cookie)
    with Uvicorn(ws=ws, workers=servers, deflate=deflate) as server:
        assert server.proc is not None
        stats = ProcStats(server.proc.pid, children=True)
        url = f"ws://127.0.0.1:{server.port}/ws/overview/"
        connect_started = time.perf_counter()
        shares = [clients // processes + (1 if n < clients % processes else 0) for n in range(processes)]
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--client-worker",
                    str(share),
                    "--url",
                    url,
                    "--origin",
                    server.base,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "BENCH_WS_COOKIE": cookie},
            )
            for share in shares
            if share
        ]
        try:
            for worker in workers:
                assert worker.stdout is not None
                line = await asyncio.to_thread(worker.stdout.readline)
                if line.strip() != "ready":
                    raise RuntimeError(f"a client process did not connect its sockets: {line!r}")
            connect_s = time.perf_counter() - connect_started
            await asyncio.sleep(1.0)
            layer = get_channel_layer()
            assert layer is not None
            rss_idle = stats.rss_mb()
            client_stats = [ProcStats(worker.pid) for worker in workers]
            client_cpu0 = [c.cpu_seconds() for c in client_stats]
            me = ProcStats(os.getpid())
            cpu0, my_cpu0, wall0 = stats.cpu_seconds(), me.cpu_seconds(), time.perf_counter()
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
                    "pods": 8,
                    "ready": 8,
                    "links_down": 0,
                }
                await layer.group_send(overview_group(), {"type": "broadcast.event", "payload": payload})
                sent += 1
            await asyncio.sleep(2.0)
            cpu1, my_cpu1, wall1 = stats.cpu_seconds(), me.cpu_seconds(), time.perf_counter()
            client_cpu = [c.cpu_seconds() - c0 for c, c0 in zip(client_stats, client_cpu0, strict=True)]
            rss_busy = stats.rss_mb()
            latencies: list[float] = []
            for worker in workers:
                assert worker.stdin is not None and worker.stdout is not None
                worker.stdin.close()
            for worker in workers:
                assert worker.stdout is not None
                latencies += json.loads(await asyncio.to_thread(worker.stdout.readline) or "[]")
        finally:
            for worker in workers:
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.kill()

    expected = sent * clients
    ms = [v * 1000 for v in latencies]
    wall = wall1 - wall0
    print(
        f"websocket fan-out ({os.environ['CHANNEL_LAYER']} channel layer, uvicorn --ws {ws}, "
        f"{servers} server process{'es' if servers > 1 else ''}"
        f"{'' if deflate else ', no permessage-deflate'}): "
        f"{clients} clients "
        f"in {len(workers)} client processes, {sent} updates at {rate:g}/s over {seconds:g} s; "
        f"latency = publish (group_send) -> client receive"
    )
    print(f"  connect all clients      {connect_s:8.2f} s")
    print(f"  delivered                {len(ms):8d} / {expected} ({100 * len(ms) / max(1, expected):.2f} %)")
    print(f"  latency p50              {quantile(ms, 0.50):8.1f} ms")
    print(f"  latency p95              {quantile(ms, 0.95):8.1f} ms")
    print(f"  latency p99              {quantile(ms, 0.99):8.1f} ms   (target < 250 ms)")
    print(f"  latency max              {max(ms) if ms else float('nan'):8.1f} ms")
    print(f"  server CPU               {100 * (cpu1 - cpu0) / wall:8.1f} % of one core (all its processes)")
    print(
        f"  client CPU               {100 * sum(client_cpu) / wall:8.1f} % of one core in all "
        f"(busiest process {100 * max(client_cpu) / wall:.1f} %)"
    )
    print(f"  publisher CPU            {100 * (my_cpu1 - my_cpu0) / wall:8.1f} % of one core")
    print(f"  server RSS idle / busy   {rss_idle:8.1f} / {rss_busy:.1f} MB")
    load = os.getloadavg()
    print(f"  machine load average     {load[0]:8.2f} (1 min), {os.cpu_count()} CPUs")


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
        "--ws",
        choices=("auto", *WS_IMPLEMENTATIONS, "all"),
        default="auto",
        help="uvicorn's websocket implementation (auto: what uvicorn picks, websockets when installed)",
    )
    parser.add_argument(
        "--server-processes", type=int, default=1, help="uvicorn worker processes (--workers)"
    )
    parser.add_argument(
        "--processes", type=int, default=4, help="client processes sharing the clients (one may starve)"
    )
    parser.add_argument(
        "--layer-only", action="store_true", help="measure the channel layer alone (no server, no websockets)"
    )
    parser.add_argument(
        "--no-deflate", action="store_true", help="serve without permessage-deflate (compression per socket)"
    )
    parser.add_argument("--client-worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--origin", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_worker:
        import uvloop

        uvloop.run(client_worker(args.client_worker, args.url, args.origin))
        return
    if args.layer == "both" or args.ws == "all":  # each run in a fresh process: settings are read once
        layers = ("pubsub", "core") if args.layer == "both" else (args.layer,)
        implementations = WS_IMPLEMENTATIONS if args.ws == "all" and not args.layer_only else (args.ws,)
        for layer in layers:
            for ws in implementations:
                argv = [f"--clients={args.clients}", f"--seconds={args.seconds}", f"--rate={args.rate}"]
                argv += [f"--processes={args.processes}", f"--ws={ws}", f"--layer={layer}"]
                argv += [f"--server-processes={args.server_processes}"]
                argv += ["--no-deflate"] if args.no_deflate else []
                argv += ["--layer-only"] if args.layer_only else []
                subprocess.run([sys.executable, __file__, *argv], check=True)
        return
    apply_env(CHANNEL_LAYER=args.layer)
    ensure_database()
    import django

    django.setup()
    if args.layer_only:
        asyncio.run(run_layer_only(args.clients, args.seconds, args.rate))
        return
    asyncio.run(
        run(
            args.clients,
            args.seconds,
            args.rate,
            max(1, args.processes),
            args.ws,
            max(1, args.server_processes),
            not args.no_deflate,
        )
    )


if __name__ == "__main__":
    main()
