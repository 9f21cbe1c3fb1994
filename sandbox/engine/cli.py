"""`python -m sandbox fault --pod-ip 127.x.y.z [--port 8000] --kind link_down --peer prefill-0`.

Injects a fault into one simulated engine through its admin API (`POST /sandbox/faults`), clears
faults (`--clear`, optionally with `--kind`/`--peer`), or shows them with the link table (`--show`).

With `--kubeconfig FILE` instead of `--pod-ip`, the fault goes to the sandbox's API server
(`sandbox/apiserver/faults.py`): `--kind http_5xx|throttle|latency|freeze|watch_gone`, with `--status`,
`--retry-after`, `--delay-ms`, `--count`, `--path` (a path prefix) and `--method`; `--clear` ends a freeze.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from sandbox.apiserver.faults import CONTROL_PATH
from sandbox.apiserver.faults import KINDS as API_KINDS
from sandbox.engine.faults import KINDS, TARGETS


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pod-ip", help="the pod's IP (a 127.x.y.z loopback address)")
    parser.add_argument("--kubeconfig", type=Path, help="a sandbox kubeconfig: fault the API server instead")
    parser.add_argument("--port", type=int, default=8000, help="the engine's port (default 8000)")
    parser.add_argument(
        "--kind", choices=sorted({*KINDS, *API_KINDS}), help="fault to inject (or to clear with --clear)"
    )
    parser.add_argument("--retry-after", type=float, help="API server throttle: Retry-After seconds")
    parser.add_argument("--path", help="API server faults: only paths starting with this (e.g. /apis/apps)")
    parser.add_argument("--method", help="API server faults: only this HTTP method (e.g. PATCH)")
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


def run_apiserver(args: argparse.Namespace) -> int:
    import base64

    import yaml

    from sandbox.faultclient import call

    config = yaml.safe_load(args.kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    token = config["users"][0]["user"]["token"]
    ca = cluster.get("certificate-authority-data")
    ca_data = base64.b64decode(ca) if ca else None
    server = cluster["server"]
    try:
        if args.show:
            status, answer = call(server, token, "GET", CONTROL_PATH, ca_data=ca_data)
        elif args.clear:
            query = f"?kind={args.kind}" if args.kind else ""
            status, answer = call(server, token, "DELETE", CONTROL_PATH + query, ca_data=ca_data)
        else:
            if args.kind not in API_KINDS:
                print(
                    "give --kind (one of " + ", ".join(API_KINDS) + "), or --clear / --show", file=sys.stderr
                )
                return 2
            body: dict[str, Any] = {"kind": args.kind}
            for name in ("status", "retry_after", "delay_ms", "count", "path", "method"):
                if getattr(args, name) is not None:
                    body[name] = getattr(args, name)
            status, answer = call(server, token, "POST", CONTROL_PATH, body, ca_data=ca_data)
    except OSError as exc:
        print(f"cannot reach the API server at {server}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=2))
    return 0 if status < 400 else 1


def run(args: argparse.Namespace) -> int:
    if args.kubeconfig is not None:
        return run_apiserver(args)
    if not args.pod_ip:
        print("give --pod-ip (an engine) or --kubeconfig (the API server)", file=sys.stderr)
        return 2
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
