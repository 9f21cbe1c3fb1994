"""What tracing adds to the gateway: two gateways side by side in one run, tracing off and on.

Both are Tandem's gateway (uvicorn, one worker, the bench database and Redis, a real inference key)
in front of the same constant-time echo upstream (bench/gateway_peers.py); one runs with
TRACES_GATEWAY=false (no trace context: no ids, no traceparent, no x-tandem-trace-id, no keep
decision), the other with it on and the default head rate. Open loop at the given rate, turns
interleaved (each round swaps the order), latency from each request's scheduled time to its last byte
(bench/loadgen.py). Prints p50/p90/p99 of each and the difference. Target: p99 added ≤ 0.2 ms.

    .venv/bin/python bench/gateway_tracing.py [--rate 100] [--seconds 5] [--rounds 4] [--stream]

Environment: BENCH_DATABASE_URL, BENCH_REDIS_URL as bench/gateway_vs_litellm.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway_peers import TandemGateway, echo_upstream, tandem_setup
from gateway_vs_litellm import MODELS, address, targets
from loadgen import Result, open_loop
from telemetry_fanout import ROOT, apply_env, ensure_database


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def code_cost(n: int = 100_000) -> tuple[float, float]:
    """µs per request of the tracing code itself, in process: (a new trace, a continued one). What it
    adds to every request whatever the machine's load: ids, headers, the send wrapper, the decision."""
    import time

    from gateway import app
    from gateway.outcome import Outcome
    from traces import sampling

    async def send(message: dict[str, object]) -> None:
        return None

    fresh = {"headers": [(b"authorization", b"Bearer x"), (b"content-type", b"application/json")]}
    parent = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    continued = {"headers": [*fresh["headers"], (b"traceparent", parent), (b"tracestate", b"app=1")]}
    out = []
    for scope in (fresh, continued):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(n):
                outcome = Outcome()
                app._trace_context(scope, outcome)
                app._traced(send, outcome.trace_id)
                outcome.trace_headers()
                sampling.decide(
                    trace_id=outcome.trace_id, status=200, backend="cluster", latency_ms=80.0, ttft_ms=20.0,
                    completion_tokens=10, slo_ttft_ms=1000, slo_tbt_ms=50, head_rate=0.01,
                )  # fmt: skip
            traced = time.perf_counter() - started
            started = time.perf_counter()
            for _ in range(n):
                Outcome()
            best = min(best, traced - (time.perf_counter() - started))
        out.append(best / n * 1e6)
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--stream", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tandem_bench_gateway")
    os.environ.setdefault("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    apply_env()
    ensure_database()
    import django

    django.setup()
    logs = ROOT / "var" / "bench-gateway"
    logs.mkdir(parents=True, exist_ok=True)
    with echo_upstream() as echo:
        secret = tandem_setup({MODELS["echo"]: echo.url})
        os.environ["TRACES_GATEWAY"] = "false"
        with TandemGateway(logs / "tracing-off.log") as off:
            os.environ["TRACES_GATEWAY"] = "true"
            with TandemGateway(logs / "tracing-on.log") as on:
                ports = {
                    "off": ("127.0.0.1", off.port),
                    "on": ("127.0.0.1", on.port),
                    "echo": address(echo.url),
                }
                found = {
                    name: targets(
                        "echo",
                        args.stream,
                        {"tandem": ports[name], "echo": ports["echo"]},
                        secret,
                        ("tandem",),
                    )["tandem"]
                    for name in ("off", "on")
                }
                results = {name: Result(name) for name in found}

                async def run() -> None:
                    for name in found:  # warm both
                        await open_loop(found[name], rate=args.rate, seconds=1.0)
                    for r in range(args.rounds):
                        order = ("off", "on") if r % 2 == 0 else ("on", "off")
                        for name in order:
                            results[name].merge(
                                await open_loop(found[name], rate=args.rate, seconds=args.seconds)
                            )

                asyncio.run(run())
    mode = "stream" if args.stream else "whole answers"
    print(
        f"gateway tracing off vs on, echo upstream, {mode}, {args.rate:g} req/s open loop, "
        f"{args.rounds} rounds"
    )
    print(f"{'':8}{'n':>7}{'errors':>8}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for name, result in results.items():
        lat = result.latency
        print(
            f"{name:8}{len(lat):>7}{result.errors + result.timeouts:>8}{quantile(lat, 0.5):>9.3f}"
            f"{quantile(lat, 0.9):>9.3f}{quantile(lat, 0.99):>9.3f}{statistics.fmean(lat):>9.3f}"
        )
    fresh, continued = code_cost()
    print(f"tracing code per request, in process: {fresh:.2f} µs (new trace), {continued:.2f} µs (continued)")
    off_l, on_l = results["off"].latency, results["on"].latency
    print(
        "added  "
        + "  ".join(
            f"p{int(q * 100)} {quantile(on_l, q) - quantile(off_l, q):+.3f} ms" for q in (0.5, 0.9, 0.99)
        )
    )


if __name__ == "__main__":
    main()
