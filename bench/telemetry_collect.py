"""Collection capacity: pods per second one worker process scrapes, parses and derives.

    .venv/bin/python bench/telemetry_collect.py [--pods 200] [--rounds 20] [--warmup-requests 200]

A child process runs the sandbox engine farm (N simulated vLLM engines with the NIXL connector:
N/2 prefill, N/2 decode, one pair per group) and a P/D router, as the sandbox's kubelet would. This
process is the "worker": it drives the product's own collection path — ``telemetry.scrape.Scraper``
(one asyncio loop + one keep-alive aiohttp session per process, every pod concurrently with its own
timeout, and Tandem's link probes through up to 16 prefill → decode pairs per round on the same
loop), parsing with ``prometheus_client`` and ``telemetry.assemble.build_snapshot`` (per pod / role /
topology / link derivation) plus the stored points; engine logs are read through the Kubernetes API
and are not part of this benchmark. Round after round, as consecutive collections of one N-pod
topology, it prints round time and two rates, each as the median and the range over rounds:
capacity = pods collected per second of the worker's CPU time (target ≥ 500 pods/s per worker
process: what one worker process sustains when it has a core to itself), and the wall-clock rate,
which on a small machine is bounded by the engine farm (its own process, on the same CPUs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.engine.farm import EngineFarm
from sandbox.engine.testing import engine_spec, loopback_base
from sandbox.router.farm import Endpoint, RouterFarm, RouterSpec
from telemetry.assemble import LinkInputs, PodTarget, build_snapshot, empty_state
from telemetry.links import engine_view
from telemetry.probe import ProbeTarget, choose
from telemetry.scrape import Scraper, ScrapeRequest
from telemetry.series import snapshot_points

MODEL = "bench-model"


async def background_load(router: str, rps: float) -> None:
    """Steady traffic through the router so counters and histograms move between collections."""
    if rps <= 0:
        return
    async with aiohttp.ClientSession() as session:
        n = 0
        while True:
            n += 1
            payload = {
                "model": MODEL,
                "max_tokens": 8,
                "ignore_eos": True,  # a fixed output length, as vLLM's benchmark tool asks for
                "messages": [{"role": "user", "content": f"shared prefix {n % 5} request {n} " * 20}],
            }

            async def one(body: dict) -> None:
                try:
                    async with session.post(f"{router}/v1/chat/completions", json=body) as response:
                        await response.read()
                except aiohttp.ClientError:
                    pass

            asyncio.get_running_loop().create_task(one(payload))
            await asyncio.sleep(1 / rps)


async def serve(count: int, rps: float) -> None:
    """The child: N engines and a router (with steady traffic); prints their addresses, runs until
    stdin closes."""
    base = loopback_base()
    farm, routers = EngineFarm(), RouterFarm()
    pods: list[tuple[str, str, str]] = []
    for n in range(count):
        role = "prefill" if n % 2 == 0 else "decode"
        name = f"{role}-{n // 2}"
        await farm.start(name, f"{base}.{n + 2}", engine_spec(role, model=MODEL), {})
        pods.append((name, role, f"g{n // 2}"))

    def endpoints() -> list[Endpoint]:
        out = []
        for name, role, group in pods:
            address = farm.address(name)
            if address:
                out.append(Endpoint(name, address[0], address[1], role, group, True))
        return out

    await routers.start("router", f"{base}.1", 0, RouterSpec(MODEL, 60, 1, 0.05), endpoints)
    router = routers.address("router")
    listing = []
    for name, role, group in pods:
        ip, port = farm.address(name)  # type: ignore[misc]
        listing.append({"name": name, "role": role, "group": group, "ip": ip, "port": port})
    url = f"http://{router[0]}:{router[1]}"  # type: ignore[index]
    print(json.dumps({"router": url, "pods": listing}), flush=True)
    load = asyncio.get_running_loop().create_task(background_load(url, rps))
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    load.cancel()
    await routers.close()
    await farm.close()


async def prepare(info: dict, requests: int) -> None:
    """Send some traffic through the router, so histograms and connector metrics have data."""
    async with aiohttp.ClientSession() as session:
        body = {"model": MODEL, "max_tokens": 4, "ignore_eos": True}
        semaphore = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with semaphore:
                payload = {**body, "messages": [{"role": "user", "content": f"shared prefix {i % 7} " * 30}]}
                async with session.post(f"{info['router']}/v1/chat/completions", json=payload) as response:
                    await response.read()

        await asyncio.gather(*(one(i) for i in range(requests)))


def scratch_topology():  # type: ignore[no-untyped-def]
    """Django set up on DATABASE_URL (migrated), with a topology to store the benchmark's collections."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from clusters.models import Cluster
    from topologies.models import Topology
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    call_command("migrate", verbosity=0)
    cluster, _ = Cluster.objects.get_or_create(
        name="bench-telemetry", defaults={"auth_method": "token", "server": "http://127.0.0.1:9"}
    )
    found = Topology.objects.filter(cluster=cluster).first()
    return found or topology_create(
        cluster=cluster, spec=preset_spec("qwen-gpu-nixl", name="bench-telemetry"), actor=None
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup-requests", type=int, default=200)
    parser.add_argument("--interval", type=float, default=2.0, help="collection interval (timeout 0.8x)")
    parser.add_argument("--load-rps", type=float, default=20.0, help="traffic during the measurement")
    parser.add_argument(
        "--no-line-memory",
        action="store_true",
        help="parse every line every time (worst case: all values moved)",
    )
    parser.add_argument(
        "--store",
        action="store_true",
        help="also store every collection (points, latest snapshot, push) in the database named by "
        "DATABASE_URL — use a scratch database; needs the usual Tandem environment variables",
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.load_rps))
        return

    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(args.pods), "--load-rps", str(args.load_rps)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SANDBOX_TIME_SCALE": "0.05"},
    )
    try:
        assert child.stdout is not None
        info = json.loads(child.stdout.readline())
        asyncio.run(prepare(info, args.warmup_requests))
        targets = [
            PodTarget(p["name"], p["role"], p["ip"], p["port"], True, "Running", group=p["group"])
            for p in info["pods"]
        ]
        requests = [ScrapeRequest(target=t) for t in targets]
        groups: dict[str, dict[str, dict]] = {}
        for pod in info["pods"]:
            groups.setdefault(pod["group"], {})[pod["role"]] = pod
        pair_targets = {
            (g["prefill"]["name"], g["decode"]["name"]): ProbeTarget(
                prefill=g["prefill"]["name"],
                decode=g["decode"]["name"],
                prefill_url=f"http://{g['prefill']['ip']}:{g['prefill']['port']}",
                decode_url=f"http://{g['decode']['ip']}:{g['decode']['port']}",
                model=MODEL,
            )
            for g in groups.values()
        }
        view = engine_view("vllm", "nixl")
        topology = scratch_topology() if args.store else None
        scraper = Scraper(line_memory=not args.no_line_memory)
        state = empty_state()
        scrape_s, derive_s, store_s, totals, cpu, points, failures = [], [], [], [], [], 0, 0
        for round_no in range(args.rounds + 1):
            time.sleep(max(0.0, args.interval - (totals[-1] if totals else 0.0)) if round_no > 1 else 0.0)
            cpu_started = time.process_time()
            started = time.perf_counter()
            probes = [pair_targets[pair] for pair in choose(sorted(pair_targets), round_no)]
            # the capacity figure counts the probes too: wait for them here (a collection does not)
            probing = scraper.probe("bench", probes, timeout_s=0.8 * args.interval)
            results = scraper.scrape(requests, timeout_s=0.8 * args.interval)
            probed = probing.result(timeout=5 + args.interval) if probing is not None else []
            scraped = time.perf_counter()
            snapshot, state, _ = build_snapshot(
                topology_id=topology.pk if topology is not None else 1,
                ts=time.time(),
                interval_s=args.interval,
                results=results,
                state=state,
                slo_ttft_ms=500.0,
                slo_tbt_ms=50.0,
                open_alerts=set(),
                alert_intervals=3,
                link_slow_ms=250.0,
                events=[],
                link_inputs=LinkInputs(view=view, probes=probed),
            )
            points = len(list(snapshot_points(snapshot)))
            derived = time.perf_counter()
            if topology is not None:
                from telemetry.services import telemetry_store

                telemetry_store(topology=topology, snapshot=snapshot, actions={})
            done = time.perf_counter()
            failures += sum(1 for r in results if r.error) + sum(1 for p in probed if not p["ok"])
            if round_no == 0:
                continue  # the first round opens the connections
            scrape_s.append(scraped - started)
            derive_s.append(derived - scraped)
            store_s.append(done - derived)
            totals.append(done - started)
            cpu.append(time.process_time() - cpu_started)
        scraper.close()
        median = statistics.median(totals)
        rows = [
            ("pods per collection (prefill + decode)", f"{args.pods} ({args.pods // 2} links)"),
            ("rounds measured", str(args.rounds)),
            ("scrape + parse per round, median", f"{statistics.median(scrape_s) * 1000:.0f} ms"),
            ("derive + points per round, median", f"{statistics.median(derive_s) * 1000:.0f} ms"),
            (
                "store (bulk insert, latest, push) per round, median",
                f"{statistics.median(store_s) * 1000:.0f} ms" if args.store else "not measured (--store)",
            ),
            (
                "whole collection per round, median / max",
                f"{median * 1000:.0f} / {max(totals) * 1000:.0f} ms",
            ),
            ("points per collection", str(points)),
            ("failed scrapes", str(failures)),
            (
                "worker CPU per round, median (min-max)",
                f"{statistics.median(cpu) * 1000:.0f} ms ({min(cpu) * 1000:.0f}-{max(cpu) * 1000:.0f})",
            ),
            (
                "WALL-CLOCK pods/s, median (min-max over rounds)",
                f"{args.pods / median:.0f} pods/s ({args.pods / max(totals):.0f}-"
                f"{args.pods / min(totals):.0f})  (engine farm in its own process, sharing the CPUs)",
            ),
            (
                "CAPACITY = pods / worker CPU-second, median (min-max)",
                f"{args.pods / statistics.median(cpu):.0f} pods/s ({args.pods / max(cpu):.0f}-"
                f"{args.pods / min(cpu):.0f})  (target >= 500 per worker process)",
            ),
        ]
        width = max(len(name) for name, _ in rows)
        memory = "off: every line parsed" if args.no_line_memory else "on"
        print(
            f"\nTelemetry collection capacity ({os.cpu_count()} CPUs; engines in a separate process; "
            f"{args.load_rps:g} req/s of traffic; line memory {memory}; interval {args.interval:g} s; "
            f"load average {os.getloadavg()[0]:.2f})"
        )
        for name, value in rows:
            print(f"  {name.ljust(width)}  {value}")
    finally:
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()


if __name__ == "__main__":
    main()
