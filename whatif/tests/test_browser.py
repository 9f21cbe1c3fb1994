"""In a real Chromium, the job run as the worker runs it: an operator starts a what-if on a topology whose
telemetry calibrates the model, watches its progress, reads the result with its fit error beside it, opens
"apply this split", sees the diff and confirms it; the ratio change starts. At 390 px wide nothing makes the
page scroll sideways."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from django.db import connection

from rebalancing.models import Rebalance
from tests.support import subprocess_env, uvicorn_server
from whatif.models import WhatIfRun
from whatif.tasks import run_whatif

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium", "args": CHROMIUM_ARGS}


def _work(run_id: int) -> threading.Thread:
    """The job, as the worker runs it (a thread: Playwright's sync API keeps a loop in the test's thread);
    its progress reaches the page through the real channel layer and the server's websocket."""

    def run() -> None:
        try:
            run_whatif(run_id)
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    return worker


def _fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_an_operator_runs_a_what_if_and_applies_the_recommended_split(
    page, make_topology, record, calibrated, operator
):
    topology = make_topology(budget=3)
    record(topology)
    calibrated(topology)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1440, "height": 1000})
    env = subprocess_env()
    with uvicorn_server(env) as base:
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", operator.username)
        page.fill("#id_password", "correct-horse-battery")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        page.goto(f"{base}/what-if/topology/{topology.pk}/")
        page.select_option("select[name=window_seconds]", "300")
        page.click("[data-whatif-start] button[type=submit]")
        page.locator("[data-whatif-run] [data-progress]").wait_for(timeout=10_000)  # queued
        worker = _work(WhatIfRun.objects.get(topology=topology).pk)
        page.locator("[data-whatif-run] [data-run-state]", has_text="Running").wait_for(timeout=10_000)
        page.screenshot(path=str(SHOTS / "whatif-running-1440.png"))
        worker.join(30)
        page.locator("table[data-whatif] tr[data-recommended]").wait_for(timeout=30_000)  # reloaded when done
        run = WhatIfRun.objects.get(topology=topology)
        assert run.state == "succeeded" and "done: 2 splits" in page.locator("[data-step]").inner_text()
        assert page.locator("table[data-whatif] tbody tr").count() == 2
        fit = page.locator("[data-calibration]")
        assert fit.get_attribute("data-verdict") == "ok" and "Fit error" in fit.inner_text()
        rows = [r.split("\t") for r in fit.locator("[data-fit-errors] tbody tr").all_inner_texts()]
        assert [r[:2] for r in rows] == [["prefill", "TTFT"], ["decode", "TBT"]]
        stored = {(e["role"], e["metric"].upper()): e for e in run.result["calibration"]["fit_errors"]}
        for role, metric, error, *_ in rows:
            assert error == f"{round(stored[role, metric]['mape'] * 100)} %"
        perf = run.result["calibration"]["perf"]
        assert f"Rates simulated prefill {perf['prefill_ms_per_token']:.3f} ms/token" in fit.inner_text()
        assert page.locator("[data-uncalibrated]").count() == 0
        page.screenshot(path=str(SHOTS / "whatif-result-1440.png"), full_page=True)
        page.set_viewport_size({"width": 390, "height": 900})
        assert _fits(page)
        page.screenshot(path=str(SHOTS / "whatif-result-390.png"), full_page=True)
        page.set_viewport_size({"width": 1440, "height": 1000})
        page.locator("tr[data-recommended] [data-apply]").click()
        preview = page.locator("[data-preview]")
        preview.wait_for()
        best = run.result["recommended"]
        text = preview.inner_text()
        assert f"Apply {best['prefill']}P / {best['decode']}D?" in text and "planner's ratio change" in text
        assert preview.locator("tbody tr").first.inner_text().split() == [
            "prefill",
            "1",
            str(best["prefill"]),
        ]
        page.screenshot(path=str(SHOTS / "whatif-apply-1440.png"), full_page=True)
        page.set_viewport_size({"width": 390, "height": 900})
        assert _fits(page)
        page.screenshot(path=str(SHOTS / "whatif-apply-390.png"), full_page=True)
        page.locator("[data-confirm]").click()
        page.locator(".msg-success").wait_for()
        rebalance = Rebalance.objects.get(topology=topology)
        assert (rebalance.target_prefill, rebalance.target_decode) == (best["prefill"], best["decode"])
        assert f"Rebalance #{rebalance.pk} to {best['prefill']}P/{best['decode']}D started" in page.content()
