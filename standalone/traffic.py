"""Demo traffic: the sandbox's open-loop load generator, round after round, until stopped.

    python -m standalone.traffic --kubeconfig var/sandbox.kubeconfig --topology 1 \
        --model deepseek-ai/DeepSeekV2 --rate 2 --pattern phase --shared-prefix-fraction 0.8

The load generator plans a whole run up front, so an endless run is a chain of rounds
(`--round` seconds each) started on a fixed clock: round k+1 starts when its time comes even
if the last requests of round k are still streaming, so traffic never pauses. Before each round
the router's address is read again from the cluster (the `sandbox.tandem.io/router-url`
annotation of the topology's ModelRoute, or of its router Service on the plain-Deployments
backend), so the traffic follows a redeploy. Each finished round prints one line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from typing import Any

ROUTER_URL = "sandbox.tandem.io/router-url"
PATTERNS = ("phase", "diurnal", "constant")


def router_url_of(objects: list[dict[str, Any]]) -> str | None:
    """The first router URL annotated on these objects (ModelRoutes or router Services)."""
    for obj in objects:
        url = ((obj.get("metadata") or {}).get("annotations") or {}).get(ROUTER_URL)
        if url:
            return str(url)
    return None


def find_router_url(kubeconfig: str, topology_id: int) -> str | None:
    """Ask the cluster where the topology's router listens; None while it has none."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=kubeconfig)
    try:
        selector = f"app.kubernetes.io/managed-by=tandem,tandem.io/topology={topology_id}"
        try:
            routes = client.CustomObjectsApi(api_client).list_cluster_custom_object(
                "networking.serving.volcano.sh", "v1alpha1", "modelroutes", label_selector=selector
            )
            url = router_url_of(routes.get("items") or [] if isinstance(routes, dict) else [])
            if url:
                return url
        except client.ApiException as error:
            if error.status != 404:  # 404: Kthena is not installed; look for a router Service
                raise
        services = client.CoreV1Api(api_client).list_service_for_all_namespaces(
            label_selector=f"{selector},tandem.io/role=router"
        )
        return router_url_of([api_client.sanitize_for_serialization(item) for item in services.items])
    finally:
        api_client.close()


def round_line(number: int, report: Any) -> str:
    line = (
        f"round {number}: {report.sent} requests, {report.succeeded} ok"
        f"{f', {report.failed} failed {report.errors}' if report.failed else ''}; "
        f"TTFT p50 {report.ttft_ms.p50:.0f} ms p95 {report.ttft_ms.p95:.0f} ms; "
        f"TBT p50 {report.itl_ms.p50:.1f} ms; {report.output_tokens_per_s:.0f} output tokens/s"
    )
    return line


async def run(args: argparse.Namespace, stop: asyncio.Event) -> None:
    from sandbox.load.runner import run_load

    rounds: dict[int, asyncio.Task[Any]] = {}
    number = 0
    waiting_said = False
    next_start = time.monotonic()
    while not stop.is_set():
        try:
            url = await asyncio.to_thread(find_router_url, args.kubeconfig, args.topology)
        except Exception as error:  # the cluster may be restarting: say so and retry
            url = None
            print(f"cannot read the router address: {error}", flush=True)
        if url is None:
            if not waiting_said:
                print(f"waiting for the router of topology {args.topology}", flush=True)
                waiting_said = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=args.retry)
            next_start = time.monotonic()
            continue
        waiting_said = False
        number += 1
        if number == 1:
            print(f"sending {args.pattern} traffic at {args.rate:g} requests/s to {url}", flush=True)
        rounds[number] = asyncio.create_task(
            run_load(
                url,
                args.model,
                args.rate,
                args.round,
                pattern=args.pattern,
                shared_prefix_fraction=args.shared_prefix_fraction,
                phase_seconds=args.round / 2,
                request_timeout=args.timeout,
                seed=number,
            )
        )
        next_start += args.round
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.0, next_start - time.monotonic()))
        for done in [n for n, task in rounds.items() if task.done()]:
            task = rounds.pop(done)
            if task.exception() is not None:
                print(f"round {done} failed: {task.exception()}", flush=True)
            else:
                print(round_line(done, task.result()), flush=True)
    for task in rounds.values():
        task.cancel()
    await asyncio.gather(*rounds.values(), return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m standalone.traffic", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--topology", type=int, required=True, help="Tandem topology id")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--rate", type=float, default=2.0, help="mean requests per second")
    parser.add_argument("--pattern", choices=PATTERNS, default="phase")
    parser.add_argument("--shared-prefix-fraction", type=float, default=0.8)
    parser.add_argument("--round", type=float, default=60.0, help="seconds per load round")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-request timeout, seconds")
    parser.add_argument("--retry", type=float, default=5.0, help="seconds between router look-ups")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.round <= 0 or not 0 <= args.shared_prefix_fraction <= 1:
        print("--rate and --round must be > 0, --shared-prefix-fraction within 0..1", file=sys.stderr)
        return 2

    async def main_async() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await run(args, stop)

    asyncio.run(main_async())
    print("traffic stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
