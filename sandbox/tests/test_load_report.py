"""run_load and `python -m sandbox load` against an in-process P/D stack."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

from sandbox import cli as sandbox_cli
from sandbox.engine.faults import Fault
from sandbox.engine.testing import PDStack
from sandbox.load import run_load

FAST = {"SANDBOX_TIME_SCALE": "0.1"}


async def test_report_has_quantiles_slo_attainment_and_no_failures():
    async with PDStack(prefill=2, env=FAST) as stack:
        report = await run_load(
            stack.router_url,
            "sim-model",
            rate=20,
            duration=1.5,
            shared_prefix_fraction=0.6,
            prefix_tokens=512,
            prompt_tokens=64,
            max_tokens=8,
            ttft_slo_ms=20000,
            tbt_slo_ms=5000,
        )
    assert (report.sent, report.succeeded, report.failed, report.errors) == (30, 30, 0, {})
    for q in (report.ttft_ms, report.itl_ms, report.e2e_ms):
        assert 0 < q.p50 <= q.p95 <= q.p99 <= q.max
    assert report.ttft_ms.count == 30
    assert report.itl_ms.count == 30 * 7
    assert report.output_tokens == 30 * 8
    assert report.slo.attainment == 1.0
    assert 10 <= report.shared_prefix_requests <= 26
    body = report.as_dict()
    assert set(body["ttft_ms"]) == {"p50", "p95", "p99", "mean", "max", "count"}
    assert set(body["slo"]) == {"ttft_ms", "tbt_ms", "ttft_attainment", "tbt_attainment", "attainment"}
    assert "SLO TTFT<=20000ms: 100.0%" in report.table()


async def test_an_unreachable_slo_and_errors_are_reported():
    async with PDStack(env=FAST) as stack:
        stack.farm.engine("sim/decode-0-0").faults.add(Fault(kind="http_5xx", status=503, count=3))
        report = await run_load(
            stack.router_url,
            "sim-model",
            rate=10,
            duration=1,
            prompt_tokens=32,
            max_tokens=4,
            ttft_slo_ms=0.001,
            tbt_slo_ms=0.001,
        )
    assert report.sent == 10
    assert report.failed >= 1
    assert set(report.errors) == {"http_502"}
    assert report.slo.ttft_attainment == 0.0
    assert report.slo.attainment == 0.0


async def test_load_cli_prints_json():
    async with PDStack(env=FAST) as stack:
        argv = [
            "load",
            "--url",
            stack.router_url,
            "--model",
            "sim-model",
            "--rate",
            "10",
            "--duration",
            "0.5",
            "--pattern",
            "phase",
            "--prompt-tokens",
            "32",
            "--max-tokens",
            "4",
            "--json",
        ]
        out = io.StringIO()

        def run() -> int:
            with contextlib.redirect_stdout(out):
                return sandbox_cli.main(argv)  # through `python -m sandbox load`

        assert await asyncio.to_thread(run) == 0
    report = json.loads(out.getvalue())
    assert report["pattern"] == "phase"
    assert report["succeeded"] == 5
    assert set(report["by_kind"]) == {"prompt_heavy", "generation_heavy"}
