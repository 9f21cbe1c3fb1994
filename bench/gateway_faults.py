"""The gateway under control-plane and upstream faults: a steady open loop through one fault at a time.

    .venv/bin/python bench/gateway_faults.py [--seconds-per-fault 60] [--clean-seconds 20] [--rate 100]
        [--faults api-403,api-500,api-timeout,queue-stalled,worker-killed,redis-restart,upstream-5xx,
                  upstream-429,upstream-timeout,upstream-stall] [--upstream-timeout 5]
    .venv/bin/python bench/gateway_faults.py --seconds-per-fault 8 --clean-seconds 4   # a short dev run

Everything runs here, on loopback, as in production but small: a private Redis (tests/faults/services.py,
so it can be stopped) that the gateway, the Celery worker, the cluster-check worker and beat all use; the
bench database; a sandbox cluster whose API server takes injected faults (sandbox/apiserver/faults.py);
the gateway (uvicorn, one worker, bench/gateway_peers.py's TandemGateway). One topology serves
``bench/faults-<time>``: its serving endpoint is not entered but discovered (beat runs
``gateway.tasks.discover_endpoints`` every GATEWAY_DISCOVERY_SECONDS = 5 s) from a LoadBalancer Service
``<topology>-router`` in the sandbox, whose load balancer forwards to a controllable upstream
(bench/fault_parts.py: answers, 5xx, 429, hangs, or stalls streams before their first byte). Its route
has a fallback (bench/gateway_peers.py's echo upstream), ``fallback_on_429`` on, and a first-byte
timeout of ``--upstream-timeout`` seconds; the breaker keeps its defaults (3 failures, 15 s open).

The load (bench/fault_parts.py's Driver on bench/loadgen.py's connections) is an open loop at
``--rate`` req/s, streamed and whole chat completions alternating, for the whole run: a clean phase,
then each fault for ``--seconds-per-fault`` followed by a clean phase. Each phase sends with its own
key, so the gateway's request records (gateway.models.GatewayRequest) are counted per phase exactly.
Per phase it prints requests served by the cluster and by the fallback (``x-tandem-backend``), refused
(a 4xx, or a 503 whose ``code`` the docs name), failed by Tandem itself (any other 5xx, a connection
error, no answer within ``--client-timeout``, a 200 whose body or stream is cut short), usage records
(rows with status 200 and tokens) and the served answers without one (lost), and p99 latency. At the
end: the gateway's RSS growth from after warm-up to the end. Targets: 0 failed by Tandem while the
cluster or the fallback can serve (the fallback always can here), 0 lost, RSS growth < 5 %.

Faults: ``api-403``/``api-500`` (every API call answered so), ``api-timeout`` (the API server accepts and
never answers); ``queue-stalled`` (both workers SIGSTOPped: nothing consumed), ``worker-killed`` (both
SIGKILLed at the start, started again at the end); ``redis-restart`` (stopped at the start, started
again, empty, at the end); ``upstream-5xx``, ``upstream-429``, ``upstream-timeout`` (no answer),
``upstream-stall`` (streams stall before their first byte). Environment: ``BENCH_DATABASE_URL``
(postgres://postgres@127.0.0.1:5432/tandem_bench_faults, created and migrated when missing).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.faults.services: the private Redis

from fault_parts import Answer, Driver, documented_codes, set_mode
from gateway_peers import Child, TandemGateway, echo_upstream
from telemetry_fanout import ROOT, ProcStats, apply_env, ensure_database, quantile

if TYPE_CHECKING:
    from sandbox.testing import SandboxCluster
    from tests.faults.services import PrivateRedis

FAULTS = (
    "api-403",
    "api-500",
    "api-timeout",
    "queue-stalled",
    "worker-killed",
    "redis-restart",
    "upstream-5xx",
    "upstream-429",
    "upstream-timeout",
    "upstream-stall",
)
API_FAULTS = {"api-403": ("http_5xx", 403), "api-500": ("http_5xx", 500), "api-timeout": ("freeze", 0)}
UPSTREAM_MODES = {
    "upstream-5xx": "5xx",
    "upstream-429": "429",
    "upstream-timeout": "hang",
    "upstream-stall": "stall",
}
LIMITS = {
    "requests_per_minute": 10_000_000,
    "tokens_per_minute": 1_000_000_000,
    "max_concurrent": 4096,
    "requests_per_day": 1_000_000_000,
    "tokens_per_day": 1_000_000_000_000,
}
Mark = tuple[float, float]  # (monotonic clock, the gateway's RSS in MB)
PROMPT = [{"role": "user", "content": "Say hello to the benchmark in a few words."}]


class Workers:
    """Celery as Tandem runs it (standalone/runner.py): a worker, a cluster-check worker and beat."""

    def __init__(self, logs: Path) -> None:
        from standalone.runner import CHECK_QUEUES, QUEUES

        self.logs = logs
        self.dir = tempfile.TemporaryDirectory(prefix="bench-faults-beat-")
        celery = [sys.executable, "-m", "celery", "-A", "controlplane"]
        quiet = ["--without-gossip", "--without-mingle", "--loglevel", "WARNING"]
        self.argv = {
            "worker": [
                *celery,
                "worker",
                "-P",
                "threads",
                "-c",
                "4",
                "-Q",
                QUEUES,
                "-n",
                "faults@%h",
                *quiet,
            ],
            "checks": [*celery, "worker", "-P", "solo", "-Q", CHECK_QUEUES, "-n", "faults-checks@%h", *quiet],
            "beat": [*celery, "beat", "--loglevel", "WARNING", "-s", f"{self.dir.name}/schedule"],
        }
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, *names: str) -> None:
        for name in names or tuple(self.argv):
            with open(self.logs / f"{name}.log", "ab") as out:  # the child keeps its own descriptor
                self.procs[name] = subprocess.Popen(
                    self.argv[name], cwd=ROOT, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT
                )

    def signal(self, sig: int, *names: str) -> None:
        for name in names:
            self.procs[name].send_signal(sig)
            if sig == signal.SIGKILL:
                self.procs[name].wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.dir.cleanup()


@dataclass
class Setup:
    sandbox: SandboxCluster
    redis: PrivateRedis
    upstream: Child
    workers: Workers
    topology_id: int
    keys: list[tuple[str, str]]  # (key id, secret) per phase
    model: str
    notes: dict[int, str] = field(default_factory=dict)  # phase -> what discovery showed at its end
    baseline: list[tuple[int, int]] = field(default_factory=list)  # per phase key: rows of the warm-up


def expose(sandbox: SandboxCluster, namespace: str, name: str, port: int) -> str:
    """A LoadBalancer Service `name` in `namespace` forwarding to 127.0.0.1:`port`; its external IP."""
    from kubernetes import client

    core = client.CoreV1Api(sandbox.api_client())
    body: Any = {"metadata": {"name": namespace}}
    core.create_namespace(body)
    ports = [{"name": "http", "port": 8000, "targetPort": port, "protocol": "TCP"}]
    service: Any = {"metadata": {"name": name}, "spec": {"type": "LoadBalancer", "ports": ports}}
    core.create_namespaced_service(namespace, service)
    addresses = [
        {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}
    ]
    endpoints: Any = {"metadata": {"name": name}, "subsets": addresses}
    core.create_namespaced_endpoints(namespace, endpoints)

    def ingress() -> str | None:
        status = core.read_namespaced_service(name, namespace).status
        found = status.load_balancer.ingress if status and status.load_balancer else None
        return found[0].ip if found else None

    return str(sandbox.wait_for(ingress, timeout=20, message="the router Service's external address"))


def configure(
    sandbox: SandboxCluster, upstream_port: int, fallback_url: str, phases: int, timeout: int
) -> tuple[int, str, list[tuple[str, str]]]:
    """Cluster, a deployed topology whose endpoint is discovered, its route and fallback, a key per phase."""
    from accounts.models import User
    from clusters.services import cluster_register
    from gateway.models import Route
    from gateway.services import route_update, routes_discover
    from keys.services import key_create
    from topologies.models import Topology
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    stamp = time.strftime("%H%M%S")
    admin, _ = User.objects.get_or_create(username="bench-faults-admin", defaults={"role": "admin"})
    Topology.objects.filter(cluster__name__startswith="bench-faults-").update(deployed_revision=None)
    cluster = cluster_register(name=f"bench-faults-{stamp}", server=sandbox.server, token=sandbox.token)
    model = f"bench/faults-{stamp}"
    spec = preset_spec("qwen-gpu-nixl")
    spec.update(name="faults", namespace=f"faults-{stamp}", model_name=model, backend="deployments")
    spec["routing"]["model_name"] = model
    topology = topology_create(cluster=cluster, spec=spec, actor=admin)
    topology.deployed_revision = topology.current_revision  # as a deploy leaves it; the sandbox serves it
    topology.save(update_fields=["deployed_revision"])
    ip = expose(sandbox, topology.namespace, f"{topology.name}-router", upstream_port)
    changes = {
        "fallback_base_url": fallback_url + "/v1",
        "fallback_model": "bench/fallback",
        "fallback_on_429": True,
        "timeout_seconds": timeout,
    }
    route_update(topology=topology, changes=changes, actor=admin)
    routes_discover()
    found = Route.objects.get(topology=topology).discovered_url
    if ip not in found:
        raise RuntimeError(f"discovery found {found!r}, not the Service's address {ip}")
    keys = []
    for n in range(phases):
        issued = key_create(
            actor=admin, owner=admin, name=f"faults {stamp} #{n}", purpose="production", limits_given=LIMITS
        )
        keys.append((str(issued.key.pk), issued.secret))
    return topology.pk, model, keys


def request_bytes(port: int, model: str, secret: str, stream: bool) -> bytes:
    import json

    body: dict[str, object] = {"model": model, "messages": PROMPT, "max_tokens": 8}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    data = json.dumps(body).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(data)}\r\n"
    head += f"Content-Type: application/json\r\nAuthorization: Bearer {secret}\r\n\r\n"
    return head.encode() + data


def discovery_state(topology_id: int) -> str:
    from django.db import close_old_connections

    from gateway.models import Route

    close_old_connections()
    route = Route.objects.get(topology_id=topology_id)
    kept = "endpoint kept" if route.discovered_url else "endpoint CLEARED"
    stale = f", stale: {route.discovered_stale_reason[:100]}" if route.discovered_stale_reason else ""
    return kept + stale


@dataclass
class Fault:
    """One fault: `begin` at the start of its phase, `end` at its end (blocking calls). What discovery
    shows is noted just before the fault ends (after Redis is back, for Redis)."""

    name: str
    setup: Setup
    phase: int

    def note(self) -> None:
        self.setup.notes[self.phase] = discovery_state(self.setup.topology_id)

    def begin(self) -> None:
        setup, name = self.setup, self.name
        if name in API_FAULTS:
            kind, status = API_FAULTS[name]
            setup.sandbox.api_fault(kind, **({"status": status} if status else {}))
        elif name == "queue-stalled":
            setup.workers.signal(signal.SIGSTOP, "worker", "checks")
        elif name == "worker-killed":
            setup.workers.signal(signal.SIGKILL, "worker", "checks")
        elif name == "redis-restart":
            setup.redis.stop()
        else:
            set_mode(setup.upstream.url, UPSTREAM_MODES[name])

    def end(self) -> None:
        setup, name = self.setup, self.name
        if name == "redis-restart":
            setup.redis.start()
            self.note()
            return
        self.note()
        if name in API_FAULTS:
            setup.sandbox.clear_api_faults()
        elif name == "queue-stalled":
            setup.workers.signal(signal.SIGCONT, "worker", "checks")
        elif name == "worker-killed":
            setup.workers.start("worker", "checks")
        else:
            set_mode(setup.upstream.url, "ok")


async def timeline(
    driver: Driver, setup: Setup, args: argparse.Namespace, rss: Callable[[], float], marks: list[Mark]
) -> None:
    """Phase 0 clean, then each fault (odd phases) and a clean phase after it (even phases); a mark
    (clock, the gateway's RSS) at each phase's start and at the end."""
    state = {"phase": 0}
    driver.phase = lambda: state["phase"]
    mark = lambda: marks.append((time.monotonic(), rss()))  # noqa: E731
    mark()
    await asyncio.sleep(args.clean_seconds)
    for n, name in enumerate(args.faults):
        phase = 2 * n + 1
        fault = Fault(name, setup, phase)
        state["phase"] = phase
        mark()
        await asyncio.to_thread(fault.begin)
        print(f"  {time.strftime('%H:%M:%S')} {name} ...", flush=True)
        await asyncio.sleep(args.seconds_per_fault - (time.monotonic() - marks[-1][0]))
        await asyncio.to_thread(fault.end)
        state["phase"] = phase + 1
        mark()
        await asyncio.sleep(args.clean_seconds)
    mark()
    driver.stopped.set()


def usage_rows(keys: list[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """Key id -> (rows, usage rows: status 200 with tokens) in the gateway's request records."""
    from django.db import close_old_connections
    from django.db.models import Count, Q

    from gateway.models import GatewayRequest

    close_old_connections()
    found = (
        GatewayRequest.objects.filter(key_id__in=[k for k, _ in keys])
        .values("key_id")
        .annotate(rows=Count("id"), usage=Count("id", filter=Q(status=200, completion_tokens__gt=0)))
    )
    return {str(r["key_id"]): (r["rows"], r["usage"]) for r in found}


def table(
    faults: list[str],
    answers: list[Answer],
    rows: dict[int, tuple[int, int]],
    marks: list[Mark],
    notes: dict[int, str],
) -> None:
    by_phase: dict[int, list[Answer]] = {}
    for answer in answers:
        by_phase.setdefault(answer.phase, []).append(answer)
    head = f"  {'phase':<24}{'s':>5}{'sent':>7}{'cluster':>9}{'fallback':>9}{'refused':>9}{'failed':>8}"
    print(head + f"{'records':>9}{'lost':>6}{'p99 ms':>8}{'RSS MB':>8}  codes (refused / failed)")
    for phase in range(2 * len(faults) + 1):
        got = by_phase.get(phase, [])
        count = Counter(a.kind for a in got)
        served = count["cluster"] + count["fallback"]
        usage = rows.get(phase, (0, 0))[1]
        codes = Counter(f"{a.code}" for a in got if a.kind in ("refused", "failed"))
        label = faults[(phase - 1) // 2] if phase % 2 else ("clean" if phase == 0 else "  clean after")
        seconds = marks[phase + 1][0] - marks[phase][0]
        p99 = quantile([a.ms for a in got if a.kind in ("cluster", "fallback")], 0.99)
        said = ", ".join(f"{code} ×{n}" for code, n in codes.most_common(3))
        print(
            f"  {label:<24}{seconds:5.0f}{len(got):7d}{count['cluster']:9d}{count['fallback']:9d}"
            f"{count['refused']:9d}{count['failed']:8d}{usage:9d}{max(0, served - usage):6d}{p99:8.0f}"
            f"{marks[phase + 1][1]:8.1f}"
            f"  {said}"
        )
        if phase in notes:
            print(f"  {'':<24}discovery at the end: {notes[phase]}")


def run(args: argparse.Namespace, logs: Path) -> None:
    import django

    from tests.faults.services import private_redis

    with private_redis() as redis:
        os.environ["BENCH_REDIS_URL"] = redis.url
        os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tandem_bench_faults")
        apply_env(GATEWAY_DISCOVERY_SECONDS="5", CHANNEL_PREFIX="tandem-bench-faults")
        ensure_database()
        django.setup()
        from sandbox.testing import SandboxCluster

        faults = args.faults
        phases = 2 * len(faults) + 1
        with (
            SandboxCluster(nodes=1, accelerators=["nvidia.com/gpu=8"], kthena=False) as sandbox,
            Child([sys.executable, str(Path(__file__).with_name("fault_parts.py")), "upstream"]) as upstream,
            echo_upstream() as fallback,
        ):
            topology_id, model, keys = configure(
                sandbox, int(upstream.url.rsplit(":", 1)[1]), fallback.url, phases, args.upstream_timeout
            )
            workers = Workers(logs)
            workers.start()
            setup = Setup(sandbox, redis, upstream, workers, topology_id, keys, model)
            try:
                with TandemGateway(logs / "tandem.log") as gateway:
                    answers, marks, rss = drive(args, setup, gateway)
                # the gateway wrote its last records at shutdown (its lifespan flush)
            finally:
                workers.stop()
            counts = usage_rows(keys)
            rows = {phase: counts.get(key, (0, 0)) for phase, (key, _) in enumerate(keys)}
            rows = {p: (r[0] - setup.baseline[p][0], r[1] - setup.baseline[p][1]) for p, r in rows.items()}
    print(
        f"\n{args.rate:g} req/s (streamed and whole alternating), {args.seconds_per_fault:g} s per fault, "
        f"{args.clean_seconds:g} s clean before and after; the route's first-byte timeout "
        f"{args.upstream_timeout} s"
    )
    table(faults, answers, rows, marks, setup.notes)
    start, end = rss
    steady, peak = marks[1][1], max(m[1] for m in marks)
    print(
        f"\n  gateway RSS {start:.1f} MB after warm-up, {steady:.1f} MB after the first clean phase, "
        f"{peak:.1f} MB at most (at a phase's end), {end:.1f} MB at the end: "
        f"{100 * (end - start) / start:+.1f} % from the start (target < 5 %), "
        f"{100 * (end - steady) / steady:+.1f} % from the first clean phase's end"
    )
    failed = sum(1 for a in answers if a.kind == "failed")
    served = sum(1 for a in answers if a.kind in ("cluster", "fallback"))
    lost = sum(
        max(0, sum(1 for a in answers if a.phase == p and a.kind in ("cluster", "fallback")) - rows[p][1])
        for p in rows
    )
    print(
        f"  {len(answers)} requests, {served} served, {failed} failed by Tandem (target 0), "
        f"{lost} usage records lost (target 0)"
    )
    log = (logs / "tandem.log").read_text(errors="replace")
    print(
        f"  the gateway's log: {log.count(' ERROR ')} ERROR lines, {log.count('Traceback')} tracebacks, "
        f"{log.count(' WARNING ')} WARNING lines; logs in {logs}"
    )


def drive(
    args: argparse.Namespace, setup: Setup, gateway: TandemGateway
) -> tuple[list[Answer], list[Mark], tuple[float, float]]:
    import uvloop
    from gateway_vs_litellm import check
    from loadgen import Target

    requests = [
        {s: request_bytes(gateway.port, setup.model, secret, s) for s in (False, True)}
        for _, secret in setup.keys
    ]
    for phase in requests:  # every key known to the gateway, and the cluster serving, before any fault
        for stream in (False, True):
            target = Target(
                "tandem", "127.0.0.1", gateway.port, phase[stream], b"[DONE]" if stream else b'"choices"'
            )
            line = check(target)
            if "x-tandem-backend cluster" not in line:
                raise RuntimeError(f"warm-up not served by the cluster: {line}")
    time.sleep(2.5)  # the recorder writes every second
    counts = usage_rows(setup.keys)
    setup.baseline = [counts.get(key, (0, 0)) for key, _ in setup.keys]
    stats = ProcStats(gateway.pid)
    rss_start = stats.rss_mb()
    marks: list[Mark] = []
    driver = Driver(
        gateway.port,
        requests,
        lambda: 0,
        rate=args.rate,
        timeout=args.client_timeout,
        documented=documented_codes(),
    )

    async def both() -> None:
        await asyncio.gather(driver.run(), timeline(driver, setup, args, stats.rss_mb, marks))

    print(
        f"  {time.strftime('%H:%M:%S')} load starts: {args.rate:g} req/s; gateway pid {gateway.pid}",
        flush=True,
    )
    uvloop.run(both())
    time.sleep(2.5)
    return driver.answers, marks, (rss_start, stats.rss_mb())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-per-fault", type=float, default=60.0)
    parser.add_argument(
        "--clean-seconds", type=float, default=20.0, help="clean phase before and after each fault"
    )
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second, open loop")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"some of {','.join(FAULTS)}")
    parser.add_argument("--upstream-timeout", type=int, default=5, help="the route's first-byte timeout, s")
    parser.add_argument("--client-timeout", type=float, default=30.0, help="the load generator's wait, s")
    args = parser.parse_args()
    args.faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(args.faults) - set(FAULTS))
    if unknown:
        sys.exit(f"unknown fault {unknown[0]}; choose from {', '.join(FAULTS)}")
    logs = ROOT / "var" / "bench-faults"
    logs.mkdir(parents=True, exist_ok=True)
    for old in logs.glob("*.log"):
        old.unlink()
    run(args, logs)


if __name__ == "__main__":
    main()
