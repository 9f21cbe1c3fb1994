"""`python -m sandbox fault --pod-ip 127.x.y.z [--port 8000] --kind link_down --peer prefill-0`.

Injects a fault into one simulated engine through its admin API (`POST /sandbox/faults`), clears
faults (`--clear`, optionally with `--kind`/`--peer`), or shows them with the link table (`--show`).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any

from sandbox.engine.faults import KINDS, TARGETS


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pod-ip", required=True, help="the pod's IP (a 127.x.y.z loopback address)")
    parser.add_argument("--port", type=int, default=8000, help="the engine's port (default 8000)")
    parser.add_argument("--kind", choices=KINDS, help="fault to inject (or to clear with --clear)")
    parser.add_argument("--peer", help="peer pod name, for link_down/link_slow")
    parser.add_argument("--status", type=int, help="HTTP status for http_5xx (default 503)")
    parser.add_argument("--delay-ms", type=float, help="extra delay for slow / link_slow")
    parser.add_argument("--factor", type=float, help="slow-down factor for link_slow (default 10)")
    parser.add_argument("--target", choices=TARGETS, help="what a slow fault delays (default inference)")
    parser.add_argument("--count", type=int, help="affect only the next N requests")
    parser.add_argument("--probability", type=float, help="affect each request with this probability")
    parser.add_argument(
        "--clear", action="store_true", help="remove faults (all, or those matching --kind/--peer)"
    )
    parser.add_argument("--show", action="store_true", help="print the engine's faults and KV link table")
    parser.set_defaults(func=run)


def add_fault_subcommand(subparsers: Any) -> None:
    """Register `fault` on an argparse sub-parser collection (`parser.add_subparsers()`)."""
    _configure(subparsers.add_parser("fault", help="inject or clear a fault in a simulated engine"))


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def run(args: argparse.Namespace) -> int:
    if not args.pod_ip.startswith("127."):
        print("--pod-ip must be a sandbox pod address (127.0.0.0/8)", file=sys.stderr)
        return 2
    base = f"http://{args.pod_ip}:{args.port}"
    try:
        if args.show:
            _, faults = _call("GET", f"{base}/sandbox/faults")
            _, links = _call("GET", f"{base}/sandbox/kv/links")
            print(json.dumps({"faults": faults.get("faults", []), "kv_links": links}, indent=2))
            return 0
        if args.clear:
            query = "&".join(f"{k}={v}" for k, v in (("kind", args.kind), ("peer", args.peer)) if v)
            status, answer = _call("DELETE", f"{base}/sandbox/faults" + (f"?{query}" if query else ""))
        else:
            if not args.kind:
                print("give --kind (one of " + ", ".join(KINDS) + "), or --clear / --show", file=sys.stderr)
                return 2
            body: dict[str, Any] = {"kind": args.kind}
            for name in ("peer", "status", "delay_ms", "factor", "target", "count", "probability"):
                value = getattr(args, name)
                if value is not None:
                    body[name] = value
            status, answer = _call("POST", f"{base}/sandbox/faults", body)
    except OSError as exc:
        print(f"cannot reach the engine at {base}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=2))
    return 0 if status < 400 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox fault", description=__doc__)
    _configure(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))
