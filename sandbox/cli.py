"""`python -m sandbox <command>`: `up` runs a sandbox cluster; other commands come from their packages."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import signal
import sys
from pathlib import Path

from sandbox.controllers.runtime import DEFAULT_ACCELERATOR, Sandbox, SandboxOptions
from sandbox.netns import MODES

# Commands provided by other sandbox packages: name → module exposing `main(argv) -> int`.
DELEGATED = {"load": "sandbox.load.cli", "fault": "sandbox.engine.cli"}


def _accelerator(text: str) -> tuple[str, int]:
    name, sep, count = text.partition("=")
    if not sep or not name or not count.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected NAME=COUNT such as huawei.com/ascend-1980=8, got {text!r}"
        )
    return name, int(count)


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def up_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox up", description="Run an emulated Kubernetes cluster."
    )
    parser.add_argument("--nodes", type=int, default=4, help="number of nodes (default 4)")
    parser.add_argument(
        "--accelerator",
        type=_accelerator,
        action="append",
        metavar="NAME=COUNT",
        help="extended resource on every node, repeatable (default huawei.com/ascend-1980=8)",
    )
    parser.add_argument("--node-label", type=_label, action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--node-cpu", default="192", help="cpu capacity per node (default 192)")
    parser.add_argument("--node-memory", default="1536Gi", help="memory capacity per node (default 1536Gi)")
    parser.add_argument("--no-kthena", action="store_true", help="start without the Kthena CRDs")
    parser.add_argument("--kubeconfig", type=Path, help="where to write the kubeconfig (default: a temp dir)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    parser.add_argument("--port", type=int, default=0, help="API server port (0 picks a free one)")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a generated CA")
    parser.add_argument("--token", help="bearer token clients must send (default: random)")
    parser.add_argument("--watch-window", type=int, default=5000, help="events kept for watch resumption")
    parser.add_argument("--max-grace", type=float, default=5.0, help="cap on pod termination grace, seconds")
    parser.add_argument("--log-requests", action="store_true", help="log every API request to stderr")
    parser.add_argument(
        "--audit-log",
        type=Path,
        metavar="PATH",
        help="append an audit.k8s.io/v1 Event per request (JSON lines)",
    )
    parser.add_argument(
        "--pod-network",
        choices=MODES,
        default="flat",
        help="flat: pods on the host's loopback (default); isolated: pods in a network namespace "
        "the host cannot reach, only the API server and LoadBalancer addresses reachable (root)",
    )
    return parser


def options_from_args(args: argparse.Namespace) -> SandboxOptions:
    if not args.host.startswith("127."):
        raise SystemExit("--host must be a loopback address (127.0.0.0/8)")
    return SandboxOptions(
        nodes=args.nodes,
        accelerators=args.accelerator or [DEFAULT_ACCELERATOR],
        node_labels=dict(args.node_label),
        node_cpu=args.node_cpu,
        node_memory=args.node_memory,
        kthena=not args.no_kthena,
        host=args.host,
        port=args.port,
        tls=args.tls,
        token=args.token,
        kubeconfig=args.kubeconfig,
        watch_window=args.watch_window,
        max_grace_seconds=args.max_grace,
        log_requests=args.log_requests,
        audit_log=args.audit_log,
        pod_network=args.pod_network,
    )


async def run_up(options: SandboxOptions) -> None:
    sandbox = Sandbox(options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await sandbox.start()
    except BaseException:
        sandbox.network.remove()
        raise
    network = f" pod_network={sandbox.network.mode}"
    if sandbox.network.isolated:
        network += f" netns={sandbox.network.name}"
    print(f"sandbox ready: server={sandbox.url} kubeconfig={sandbox.kubeconfig_path}{network}", flush=True)
    try:
        await stop.wait()
    finally:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sandbox.stop(), timeout=10)
    print("sandbox stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m sandbox {{up,{','.join(DELEGATED)}}} [options]")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "up":
        args = up_parser().parse_args(rest)
        logging.basicConfig(
            level=logging.INFO if args.log_requests else logging.WARNING, format="%(name)s: %(message)s"
        )
        asyncio.run(run_up(options_from_args(args)))
        return 0
    if command in DELEGATED:
        try:
            module = importlib.import_module(DELEGATED[command])
        except ModuleNotFoundError:
            print(f"python -m sandbox {command}: this checkout has no {DELEGATED[command]}", file=sys.stderr)
            return 2
        return int(module.main(rest))
    print(f"unknown command {command!r}; try: up, {', '.join(DELEGATED)}", file=sys.stderr)
    return 2
