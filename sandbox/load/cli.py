"""`python -m sandbox load --url http://<router> --model M --rate R --duration S ...`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from sandbox.load.runner import run_load
from sandbox.load.workload import PATTERNS


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", required=True, help="router base URL, e.g. http://127.0.5.1:8080")
    parser.add_argument("--model", required=True, help="served model name")
    parser.add_argument("--rate", type=float, required=True, help="mean requests per second")
    parser.add_argument("--duration", type=float, required=True, help="seconds of traffic")
    parser.add_argument("--pattern", choices=PATTERNS, default="constant")
    parser.add_argument(
        "--shared-prefix-fraction", type=float, default=0.0, help="0..1 of requests sharing a prefix"
    )
    parser.add_argument(
        "--prefix-tokens", type=int, default=1024, help="length of the shared prefixes, tokens"
    )
    parser.add_argument("--prompt-tokens", type=int, default=256, help="unique prompt tokens per request")
    parser.add_argument("--max-tokens", type=int, default=64, help="output tokens per request")
    parser.add_argument(
        "--phase-seconds", type=float, help="phase length for --pattern phase (default duration/2)"
    )
    parser.add_argument("--ttft-slo-ms", type=float, default=500.0)
    parser.add_argument("--tbt-slo-ms", type=float, default=50.0)
    parser.add_argument("--completions", action="store_true", help="use /v1/completions instead of chat")
    parser.add_argument("--api-key", help="bearer token for the endpoint")
    parser.add_argument("--timeout", type=float, default=60.0, help="per-request timeout, seconds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def add_load_subcommand(subparsers: Any) -> None:
    """Register `load` on an argparse sub-parser collection (`parser.add_subparsers()`)."""
    _configure(subparsers.add_parser("load", help="replay open-loop traffic and report TTFT/TBT and SLOs"))


def run(args: argparse.Namespace) -> int:
    try:
        report = asyncio.run(
            run_load(
                args.url,
                args.model,
                args.rate,
                args.duration,
                pattern=args.pattern,
                shared_prefix_fraction=args.shared_prefix_fraction,
                prefix_tokens=args.prefix_tokens,
                ttft_slo_ms=args.ttft_slo_ms,
                tbt_slo_ms=args.tbt_slo_ms,
                prompt_tokens=args.prompt_tokens,
                max_tokens=args.max_tokens,
                phase_seconds=args.phase_seconds,
                chat=not args.completions,
                request_timeout=args.timeout,
                api_key=args.api_key,
                seed=args.seed,
            )
        )
    except ValueError as exc:
        print(f"python -m sandbox load: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.table())
    return 0 if report.succeeded else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox load", description=__doc__)
    _configure(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))
