"""Gateway overhead: an upstream called directly, through Tandem's gateway and through LiteLLM's proxy.

Chat completions and, on the echo upstream, OpenAI's Responses API (``echo:responses``: the upstream
serves /v1/responses itself, so Tandem passes it through and LiteLLM calls it with its own
/v1/responses). One run, one harness, turns interleaved (each round rotates the order of direct / tandem
/ litellm), everything on loopback: the load generator (bench/loadgen.py, raw asyncio), the upstreams,
Tandem (uvicorn, one worker, the bench database and Redis, a real inference key with limits, so every
request runs the limit script and is recorded) and LiteLLM (its own virtualenv, offline, one worker, a
master key, no database) configured with the same upstreams (bench/gateway_peers.py):

- ``echo``: a constant-time upstream (answers at once), isolating what a gateway adds;
- ``sim``: a simulated P/D stack (router, prefill and decode engines) for realism.

Open loop at fixed rates (latency from each request's scheduled time to its last byte), streaming
and not, then closed loop (a fixed number of connections) for maximum requests/s. Prints added
latency (through a gateway minus direct, per percentile), server CPU per request and max
requests/s side by side. Targets: Tandem's added p99 ≤ 5 ms at 100 req/s and at most half of
LiteLLM's; Tandem's max requests/s per worker ≥ 3× LiteLLM's.

    .venv/bin/python bench/gateway_vs_litellm.py [--rates 50,100,200] [--seconds 4] [--rounds 3]
        [--connections 32] [--upstreams echo,sim] [--litellm-venv var/litellm-venv]
    .venv/bin/python bench/gateway_vs_litellm.py --http-clients   # aiohttp vs httpx: gateway_clients.py
    .venv/bin/python bench/gateway_vs_litellm.py --profile var/gateway.prof   # cProfile under load
    .venv/bin/python bench/gateway_vs_litellm.py --without-litellm   # direct and Tandem only
    .venv/bin/python bench/gateway_vs_litellm.py --stalls var/stalls.jsonl   # the gateway loop's stalls
    .venv/bin/python bench/gateway_vs_litellm.py --pin   # generator on CPU 0, servers on the rest

LiteLLM's virtualenv (never a project dependency) is made once with
``python3 -m venv var/litellm-venv && var/litellm-venv/bin/pip install 'litellm[proxy]'``.
Environment: ``BENCH_DATABASE_URL`` (postgres://postgres@127.0.0.1:5432/tandem_bench_gateway,
created and migrated when missing), ``BENCH_REDIS_URL`` (redis://127.0.0.1:6379/13).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.request import Request, urlopen

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_peers import (
    LITELLM_MASTER_KEY,
    LiteLLM,
    TandemGateway,
    echo_upstream,
    litellm_version,
    sim_upstream,
    tandem_setup,
)
from gateway_tables import Cell, mode, print_closed, print_open, print_summary
from loadgen import Result, Target, closed_loop, open_loop
from loop_stalls import summary
from telemetry_fanout import ROOT, ProcStats, apply_env, ensure_database, free_port

PATHS = ("direct", "tandem", "tandem-cf", "litellm")
# tandem-cf: the same gateway with GATEWAY_SPECULATIVE_ADMISSION=false, each key checked before the
# upstream call (--checked-first)
MODELS = {"echo": "bench/echo", "sim": "bench/sim"}
PROMPT = [{"role": "user", "content": "Say hello to the benchmark in a few words."}]
# An upstream label names the API too: "echo" is chat completions, "echo:responses" OpenAI's Responses API
# (/v1/responses) on the same upstream, which serves it itself as vLLM does: Tandem passes it through,
# LiteLLM calls the upstream's own /v1/responses.
RESPONSES = ":responses"


def split(label: str) -> tuple[str, str]:
    """(the upstream, the API path) of an upstream label."""
    if label.endswith(RESPONSES):
        return label.removesuffix(RESPONSES), "/v1/responses"
    return label, "/v1/chat/completions"


def body(label: str, stream: bool) -> bytes:
    upstream, api = split(label)
    request: dict[str, object]
    if api == "/v1/responses":
        request = {
            "model": MODELS[upstream],
            "input": PROMPT[0]["content"],
            "max_output_tokens": 8,
            "store": False,
        }
        if stream:
            request["stream"] = True
        return json.dumps(request).encode()
    request = {"model": MODELS[upstream], "messages": PROMPT, "max_tokens": 8}
    if stream:
        request.update(stream=True, stream_options={"include_usage": True})
    return json.dumps(request).encode()


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def targets(
    upstream: str,
    stream: bool,
    ports: dict[str, tuple[str, int]],
    secret: str,
    paths: tuple[str, ...] = PATHS,
) -> dict[str, Target]:
    server, api = split(upstream)
    if api == "/v1/responses":
        expect = b"response.completed" if stream else b'"output"'
    else:
        expect = b"[DONE]" if stream else b'"choices"'
    payload = body(upstream, stream)
    auth = {
        "tandem": f"Bearer {secret}",
        "tandem-cf": f"Bearer {secret}",
        "litellm": f"Bearer {LITELLM_MASTER_KEY}",
    }
    found = {}
    for path in paths:
        host, port = ports[server if path == "direct" else path]
        headers = {"Authorization": auth[path]} if path in auth else {}
        found[path] = Target.post(path, host, port, api, payload, headers, expect)
    return found


def check(target: Target) -> str:
    """One request by urllib: status, Tandem's backend header, the start of the answer."""
    head, _, payload = target.request.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if not line.startswith("Host"))
    url = f"http://{target.host}:{target.port}{lines[0].split(' ')[1]}"
    request = Request(url, data=payload, headers=headers)
    with urlopen(request, timeout=30) as response:  # noqa: S310 - loopback only
        answer = response.read()
        backend = response.headers.get("x-tandem-backend", "-")
        if response.status != 200 or target.expect not in answer:
            raise RuntimeError(f"{target.label}: {response.status} {answer[:200]!r}")
        return f"{target.label}: {response.status}, x-tandem-backend {backend}, {len(answer)} bytes"


async def quiet(proc: ProcStats, *, limit: float = 10.0) -> None:
    """Wait (at most `limit` s) until the server uses under 5 % of a core."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        cpu0 = proc.cpu_seconds()
        await asyncio.sleep(0.25)
        if proc.cpu_seconds() - cpu0 < 0.0125:
            return


@dataclass
class Bench:
    args: argparse.Namespace
    ports: dict[str, tuple[str, int]]
    secret: str
    stats: dict[str, ProcStats]  # path (direct = the upstream) -> process
    open_rows: dict[tuple[str, bool, float], dict[str, Cell]] = field(default_factory=dict)
    closed_rows: dict[tuple[str, bool], dict[str, Cell]] = field(default_factory=dict)

    @property
    def paths(self) -> tuple[str, ...]:
        return chosen_paths(self.args)

    def server(self, path: str, upstream: str) -> ProcStats:
        return self.stats[split(upstream)[0] if path == "direct" else path]

    async def turns(self, upstream: str, stream: bool, run, rounds: int) -> dict[str, Cell]:  # type: ignore[no-untyped-def]
        paths = self.paths
        found = targets(upstream, stream, self.ports, self.secret, paths)
        cells = {path: Cell(Result(path)) for path in found}
        for r in range(rounds):
            for path in paths[r % len(paths) :] + paths[: r % len(paths)]:
                proc = self.server(path, upstream)
                cpu0, wall0 = proc.cpu_seconds(), time.perf_counter()
                result = await run(found[path])
                cells[path].cpu += proc.cpu_seconds() - cpu0
                cells[path].wall += time.perf_counter() - wall0
                await quiet(
                    proc
                )  # an overloaded server still busy with abandoned requests slows the next turn
                cells[path].requests += result.sent + result.warm
                cells[path].result.merge(result)
        return cells

    async def run(self) -> None:
        args = self.args
        for upstream in args.upstreams:
            for stream in (False, True):
                for rate in args.rates:
                    cells = await self.turns(
                        upstream,
                        stream,
                        lambda t, rate=rate: open_loop(t, rate=rate, seconds=args.seconds),
                        args.rounds,
                    )
                    self.open_rows[(upstream, stream, rate)] = cells
                    print_open(upstream, stream, rate, cells)
        for upstream in args.closed_upstreams:
            for stream in (False, True):
                cells = await self.turns(
                    upstream,
                    stream,
                    lambda t: closed_loop(t, connections=args.connections, seconds=args.seconds),
                    args.rounds,
                )
                self.closed_rows[(upstream, stream)] = cells
                print_closed(upstream, stream, args.connections, cells)


def chosen_paths(args: argparse.Namespace) -> tuple[str, ...]:
    left_out = {"litellm"} if args.without_litellm else set()
    left_out |= set() if args.checked_first else {"tandem-cf"}
    return tuple(p for p in PATHS if p not in left_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50,100,200", help="open-loop rates, req/s")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each turn")
    parser.add_argument("--rounds", type=int, default=3, help="turns per path at each setting")
    parser.add_argument("--connections", type=int, default=32, help="closed-loop connections")
    parser.add_argument(
        "--upstreams",
        default="echo,echo:responses,sim",
        help="open-loop upstreams: echo, sim; echo:responses is /v1/responses on the echo upstream",
    )
    parser.add_argument("--closed-upstreams", default="echo,echo:responses", help="closed-loop upstreams")
    parser.add_argument("--sim-time-scale", type=float, default=0.05, help="SANDBOX_TIME_SCALE of the sim")
    parser.add_argument(
        "--litellm-venv", default=os.environ.get("BENCH_LITELLM_VENV", str(ROOT / "var/litellm-venv"))
    )
    parser.add_argument("--http-clients", action="store_true", help="aiohttp vs httpx, raw cost per request")
    parser.add_argument(
        "--clients-python",
        default=os.environ.get("BENCH_CLIENTS_PYTHON", str(ROOT / "var/http-clients-venv/bin/python")),
        help="a Python with aiohttp, httpx and uvloop for --http-clients",
    )
    parser.add_argument("--profile", help="write a cProfile of the gateway under closed-loop load here")
    parser.add_argument(
        "--stalls", help="watch the Tandem gateway's event loop and write its stalls (> 10 ms) here"
    )
    parser.add_argument("--profile-upstream", default="echo", help="the upstream label --profile loads")
    parser.add_argument(
        "--profile-rate", type=float, default=0, help="--profile with an open loop at this rate (req/s)"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the load generator on CPU 0, every server (upstreams and gateways) on the other CPUs, so "
        "the generator's clock is never queued behind the servers it measures",
    )
    parser.add_argument(
        "--without-litellm", action="store_true", help="only the direct and Tandem paths (no LiteLLM venv)"
    )
    parser.add_argument(
        "--checked-first",
        action="store_true",
        help="also Tandem with GATEWAY_SPECULATIVE_ADMISSION=false (path tandem-cf): every key checked first",
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="niceness of the harness and every server it starts (e.g. -10 on a busy shared machine)",
    )
    args = parser.parse_args()
    if args.nice:
        os.nice(args.nice)  # inherited by every process started below, gateways alike
    import uvloop

    if args.http_clients:
        clients = Path(__file__).resolve().parent / "gateway_clients.py"
        subprocess.run([args.clients_python, str(clients), f"--rounds={args.rounds}"], check=True)
        return
    args.rates = [float(r) for r in args.rates.split(",") if r]
    args.upstreams = [u for u in args.upstreams.split(",") if u]
    args.closed_upstreams = [u for u in args.closed_upstreams.split(",") if u]
    venv = Path(args.litellm_venv)
    if not args.profile and not args.without_litellm and not (venv / "bin" / "litellm").exists():
        sys.exit(
            f"LiteLLM is not in {venv}: python3 -m venv {venv} && {venv}/bin/pip install 'litellm[proxy]'"
        )
    os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tandem_bench_gateway")
    os.environ.setdefault("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    apply_env()
    ensure_database()
    import django

    django.setup()
    logs = ROOT / "var" / "bench-gateway"
    logs.mkdir(parents=True, exist_ok=True)
    needed = (
        set(args.upstreams)
        | set(args.closed_upstreams)
        | ({args.profile_upstream} if args.profile else set())
    )
    if any(split(label)[1] == "/v1/responses" and split(label)[0] != "echo" for label in needed):
        sys.exit("/v1/responses is measured on the echo upstream only (the sim's router does not serve it)")
    with echo_upstream() as echo, sim_upstream(MODELS["sim"], args.sim_time_scale) as sim:
        urls = {"echo": echo.url, "sim": sim.url}
        secret = tandem_setup({MODELS[u]: urls[u] for u in ("echo", "sim")})
        if args.profile:
            profile(args, logs, echo, secret)
            return
        peer = "LiteLLM left out" if args.without_litellm else f"LiteLLM {litellm_version(venv)} ({venv})"
        print(
            f"{peer}, Tandem gateway (uvicorn, 1 worker); "
            f"upstreams: echo {echo.url}, sim {sim.url} (SANDBOX_TIME_SCALE {args.sim_time_scale:g})"
        )
        litellm_port = free_port()
        stalls = Path(args.stalls).resolve() if args.stalls else None
        peers = {MODELS[u]: urls[u] + "/v1" for u in ("echo", "sim")}
        with (
            TandemGateway(logs / "tandem.log", stalls=stalls) as tandem,
            contextlib.nullcontext()
            if not args.checked_first
            else TandemGateway(
                logs / "tandem-cf.log", env={"GATEWAY_SPECULATIVE_ADMISSION": "false"}
            ) as checked,
            contextlib.nullcontext()
            if args.without_litellm
            else LiteLLM(venv, peers, litellm_port, logs / "litellm.log") as litellm,
        ):
            ports = {"tandem": ("127.0.0.1", tandem.port), "litellm": ("127.0.0.1", litellm_port)}
            ports.update({u: address(urls[u]) for u in ("echo", "sim")})
            if checked is not None:
                ports["tandem-cf"] = ("127.0.0.1", checked.port)
            paths = chosen_paths(args)
            for upstream in sorted(needed):
                for stream in (False, True):
                    for target in targets(upstream, stream, ports, secret, paths).values():
                        for _ in range(20):  # warm up (LiteLLM's first requests are slow)
                            line = check(target)
                        print(f"  check {upstream} {mode(stream)}: {line}")
            stats = {
                "echo": ProcStats(echo.pid),
                "sim": ProcStats(sim.pid),
                "tandem": ProcStats(tandem.pid, children=True),
            }
            if litellm is not None:
                stats["litellm"] = ProcStats(litellm.pid, children=True)
            if checked is not None:
                stats["tandem-cf"] = ProcStats(checked.pid, children=True)
                print(
                    "  tandem-cf: the same gateway, GATEWAY_SPECULATIVE_ADMISSION=false (key checked first)"
                )
            if args.pin:
                generator, servers = pin_split()
                os.sched_setaffinity(0, generator)
                for proc in stats.values():
                    pin_process(proc.pid, servers)
                print(f"  pinned: generator on CPU {sorted(generator)}, servers on CPUs {sorted(servers)}")
            bench = Bench(args, ports, secret, stats)
            load0 = os.getloadavg()[0]
            started = time.monotonic()
            uvloop.run(bench.run())
            print_summary(bench.open_rows, bench.closed_rows)
            print(
                f"\n  {time.monotonic() - started:.0f} s of turns; machine load average {load0:.2f} at the "
                f"start, {os.getloadavg()[0]:.2f} at the end ({os.cpu_count()} CPUs for the generator, "
                "upstreams and gateways, and whatever else runs here)"
            )
        if stalls is not None:
            print(summary(stalls))


def pin_split() -> tuple[set[int], set[int]]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("--pin needs at least two CPUs")
    return {cpus[0]}, set(cpus[1:])


def pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` and of its child processes (uvicorn's, LiteLLM's) onto `cpus`."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cpus)
        for child in (task / "children").read_text().split():
            pin_process(int(child), cpus)


def profile(args: argparse.Namespace, logs: Path, echo, secret: str) -> None:  # type: ignore[no-untyped-def]
    import pstats

    import uvloop

    out = Path(args.profile).resolve()
    with TandemGateway(logs / "tandem-profiled.log", profile=out) as tandem:
        ports = {
            "tandem": ("127.0.0.1", tandem.port),
            "litellm": ("", 0),
            "echo": address(echo.url),
            "sim": ("", 0),
        }

        async def load() -> None:
            for stream in (False, True):
                target = targets(args.profile_upstream, stream, ports, secret)["tandem"]
                if args.profile_rate:
                    result = await open_loop(target, rate=args.profile_rate, seconds=args.seconds * 2)
                else:
                    result = await closed_loop(target, connections=args.connections, seconds=args.seconds * 2)
                rps = len(result.latency) / result.seconds
                print(f"profiled {mode(stream)}: {rps:.0f} req/s, {result.errors} errors")

        for stream in (False, True):
            check(targets(args.profile_upstream, stream, ports, secret)["tandem"])
        uvloop.run(load())
    stats = pstats.Stats(str(out))
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
