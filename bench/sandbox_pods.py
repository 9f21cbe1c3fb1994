"""How many simulated P/D pods one sandbox process carries, and how fast it answers.

    .venv/bin/python bench/sandbox_pods.py [--engines 200] [--seconds 10] [--clients 64]

A child process runs the engine farm (N engines: N/2 prefill + N/2 decode in N/2 groups) and one
P/D router in front of them — as the sandbox's kubelet would — and this process measures it:
memory per engine (child RSS delta / N, right after start and after traffic), `/metrics` scrape
latency (all N concurrently, and one at a time), and the request rate through the router (closed
loop with a fixed number of clients, then open loop at 80% of that rate with TTFT/TBT quantiles).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.engine.farm import EngineFarm
from sandbox.engine.testing import engine_spec, loopback_base
from sandbox.load import quantile, run_load
from sandbox.router.farm import Endpoint, RouterFarm, RouterSpec

MODEL = "bench-model"


def rss_bytes(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the child: a farm of engines and a router ---------------------------------------------------
async def serve(count: int) -> None:
    base = loopback_base()
    farm, routers = EngineFarm(), RouterFarm()
    pods: list[tuple[str, str, str]] = []
    await farm._ensure_runner()  # the shared server exists before the baseline is taken
    await routers.start("bench/warm", f"{base}.250", 0, RouterSpec(MODEL, 1, 0, 0), list)
    await routers.stop("bench/warm")
    before = rss_bytes()
    for n in range(count):
        role = "prefill" if n % 2 == 0 else "decode"
        name = f"{role}-{n // 2}"
        spec = engine_spec(role, model=MODEL, env={"SANDBOX_TIME_SCALE": "1"})
        await farm.start(f"bench/{name}", f"{base}.{n + 2}", spec, {})
        pods.append((name, role, f"g{n // 2}"))
    after = rss_bytes()

    def endpoints() -> list[Endpoint]:
        out = []
        for name, role, group in pods:
            address = farm.address(f"bench/{name}")
            if address:
                out.append(Endpoint(name, address[0], address[1], role, group, True))
        return out

    await routers.start("bench/router", f"{base}.1", 0, RouterSpec(MODEL, 60, 2, 0.05), endpoints)
    router = routers.address("bench/router")
    urls = [f"http://{farm.address(f'bench/{n}')[0]}:{farm.address(f'bench/{n}')[1]}" for n, _, _ in pods]  # type: ignore[index]
    print(
        json.dumps(
            {
                "rss_before": before,
                "rss_after": after,
                "router": f"http://{router[0]}:{router[1]}",  # type: ignore[index]
                "pods": urls,
            }
        ),
        flush=True,
    )
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await routers.close()
    await farm.close()


# --- the parent: measurements ------------------------------------------------------------------
async def scrape(session: aiohttp.ClientSession, url: str) -> float:
    started = time.perf_counter()
    async with session.get(f"{url}/metrics") as response:
        await response.read()
        assert response.status == 200
    return time.perf_counter() - started


async def closed_loop(url: str, clients: int, seconds: float) -> tuple[int, list[float], int]:
    done: list[float] = []
    errors = 0
    stop = time.monotonic() + seconds
    body = {"model": MODEL, "messages": [{"role": "user", "content": "bench " * 100}], "max_tokens": 16}
    body["ignore_eos"] = True  # a fixed output length, as vLLM's benchmark tool asks for

    async def worker(session: aiohttp.ClientSession, index: int) -> None:
        nonlocal errors
        n = 0
        while time.monotonic() < stop:
            n += 1
            payload = {**body, "messages": [{"role": "user", "content": f"client {index} request {n} " * 40}]}
            started = time.perf_counter()
            async with session.post(f"{url}/v1/chat/completions", json=payload) as response:
                await response.read()
                if response.status == 200:
                    done.append(time.perf_counter() - started)
                else:
                    errors += 1

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session, i) for i in range(clients)))
    return len(done), done, errors


def ms(values: list[float], q: float) -> str:
    return f"{quantile(values, q) * 1000:.1f}"


async def measure(info: dict, pid: int, count: int, seconds: float, clients: int) -> None:
    pods = info["pods"]
    router = info["router"]
    rows: list[tuple[str, str]] = []
    per_engine_start = (info["rss_after"] - info["rss_before"]) / count
    rows.append(("engines in one process", str(count)))
    rows.append(
        (
            "RSS before engines / after start",
            f"{info['rss_before'] / 2**20:.1f} MiB / {info['rss_after'] / 2**20:.1f} MiB",
        )
    )
    rows.append(("memory per engine, at start", f"{per_engine_start / 1024:.1f} KiB"))

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(scrape(session, url) for url in pods))  # connections up
        concurrent: list[float] = []
        rounds: list[float] = []
        cpu_before = cpu_seconds(pid)
        for _ in range(10):
            started = time.perf_counter()
            concurrent += await asyncio.gather(*(scrape(session, url) for url in pods))
            rounds.append(time.perf_counter() - started)
        scrape_cpu = (cpu_seconds(pid) - cpu_before) / (10 * count)
        sequential = [await scrape(session, url) for _ in range(3) for url in pods]
    rows.append(
        (
            f"/metrics, {count} at once: p50 / p95 per scrape",
            f"{ms(concurrent, 0.5)} / {ms(concurrent, 0.95)} ms",
        )
    )
    rows.append(
        (
            f"/metrics, {count} at once: whole round p50",
            f"{ms(rounds, 0.5)} ms ({count / quantile(rounds, 0.5):.0f} scrapes/s)",
        )
    )
    rows.append(("/metrics, one at a time: p50 / p95", f"{ms(sequential, 0.5)} / {ms(sequential, 0.95)} ms"))

    rows.append(("/metrics, sandbox CPU per scrape", f"{scrape_cpu * 1000:.2f} ms"))
    cpu_before = cpu_seconds(pid)
    completed, latencies, errors = await closed_loop(router, clients, seconds)
    request_cpu = (cpu_seconds(pid) - cpu_before) / max(1, completed)
    rate = completed / seconds
    rows.append(
        (
            f"router, closed loop {clients} clients, {seconds:g}s",
            f"{rate:.0f} req/s (p50 {ms(latencies, 0.5)} ms, p95 {ms(latencies, 0.95)} ms, {errors} errors)",
        )
    )
    rows.append(
        (
            "router, sandbox CPU per request (P→D, 16 tokens)",
            f"{request_cpu * 1000:.1f} ms → ~{1 / request_cpu:.0f} req/s per fully available core",
        )
    )
    sustained = 0.0
    for fraction in (0.8, 0.5, 0.3):
        target = max(1.0, round(rate * fraction))
        cpu_before = cpu_seconds(pid)
        report = await run_load(
            router,
            MODEL,
            rate=target,
            duration=seconds,
            shared_prefix_fraction=0.5,
            prefix_tokens=512,
            prompt_tokens=128,
            max_tokens=16,
            request_timeout=30,
        )
        stream_cpu = (cpu_seconds(pid) - cpu_before) / max(1, report.succeeded)
        rows.append(
            (
                f"router, open loop at {target:g} req/s, {seconds:g}s (streaming)",
                f"{report.achieved_rps:.0f} req/s achieved, {report.failed} failed, TTFT p50/p95 "
                f"{report.ttft_ms.p50:.0f}/{report.ttft_ms.p95:.0f} ms, TBT p50/p95 "
                f"{report.itl_ms.p50:.1f}/{report.itl_ms.p95:.1f} ms, "
                f"sandbox CPU {stream_cpu * 1000:.1f} ms/req",
            )
        )
        # Sustained: >= 95 % of the schedule completes, nothing fails, and the median TTFT stays under 1 s
        # (the tail is shown above; on a shared machine it is set by other processes' CPU bursts).
        if report.failed == 0 and report.achieved_rps >= 0.95 * target and report.ttft_ms.p50 < 1000:
            sustained = target
            break
    rows.append(
        ("router, sustained open-loop rate (streaming)", f"{sustained:g} req/s" if sustained else "none")
    )
    after_traffic = rss_bytes(pid)
    rows.append(
        (
            "memory per engine, after traffic",
            f"{(after_traffic - info['rss_before']) / count / 1024:.1f} KiB "
            f"(RSS {after_traffic / 2**20:.1f} MiB)",
        )
    )

    width = max(len(name) for name, _ in rows)
    load = os.getloadavg()[0]
    print(
        f"\nSandbox pods benchmark ({os.cpu_count()} CPUs, load average {load:.1f}; "
        "engines + router in one child process)"
    )
    print("-" * (width + 50))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.engines))
        return 0
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--engines", str(args.engines)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        info = json.loads(child.stdout.readline())
        asyncio.run(measure(info, child.pid, args.engines, args.seconds, args.clients))
    finally:
        if child.stdin:
            child.stdin.close()
        child.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
