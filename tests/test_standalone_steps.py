"""The standalone runner's pieces that need no servers: summaries, settings, child supervision."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from standalone.runner import demo_summary
from standalone.steps import DemoContext, StepFailed, _load_pattern, _load_rate, live_summary
from standalone.supervisor import Supervisor, wait_for
from standalone.traffic import router_url_of

LIVE: dict[str, Any] = {
    "ts": 0,
    "pods": [{"name": "p-0", "role": "prefill"}, {"name": "d-0", "role": "decode"}],
    "links": [{"state": "up"}],
    "totals": {
        "links_up": 1,
        "requests_ps": 2.0,
        "gen_tps": 240.4,
        "hit_rate": 0.4812,
        "ttft_p50": 0.0723,
        "tbt_p50": 0.0157,
    },
}


def _context(tmp_path: Path, **env: str) -> DemoContext:
    supervisor = Supervisor(log_dir=tmp_path, env={}, cwd=tmp_path)
    return DemoContext(
        root=tmp_path, state_dir=tmp_path, env=env, base_url="http://127.0.0.1:8000", supervisor=supervisor
    )


def test_live_summary_names_pods_links_and_the_moving_figures():
    assert live_summary(LIVE) == (
        "2 pods, 1 KV link(s) up; hit rate 48%, TTFT p50 72 ms, TBT p50 16 ms, 240 output tokens/s"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"pods": []},
        {"totals": {**LIVE["totals"], "links_up": 0}},
        {"totals": {**LIVE["totals"], "gen_tps": 0.0}},
        {"totals": {**LIVE["totals"], "tbt_p50": None}},
    ],
    ids=["no pods", "no link up", "no tokens", "no ITL yet"],
)
def test_live_summary_waits_until_traffic_shows(change):
    assert live_summary({**LIVE, **change}) is None


def test_live_summary_shows_a_dash_for_an_unknown_hit_rate():
    summary = live_summary({**LIVE, "totals": {**LIVE["totals"], "hit_rate": None}})
    assert summary is not None and "hit rate –" in summary


def test_router_url_comes_from_the_sandbox_annotation():
    annotated = {"metadata": {"annotations": {"sandbox.tandem.io/router-url": "http://127.9.200.2:8080"}}}
    assert router_url_of([{"metadata": {}}, annotated]) == "http://127.9.200.2:8080"
    assert router_url_of([{"metadata": {"annotations": {"other": "x"}}}]) is None
    assert router_url_of([]) is None


def test_load_settings_are_validated_with_the_variable_and_the_fix(tmp_path):
    assert _load_rate(_context(tmp_path)) == 2.0
    assert _load_rate(_context(tmp_path, TANDEM_DEMO_LOAD_RATE="0")) == 0.0
    assert _load_pattern(_context(tmp_path)) == "phase"
    assert _load_pattern(_context(tmp_path, TANDEM_DEMO_LOAD_PATTERN="diurnal")) == "diurnal"
    with pytest.raises(StepFailed, match=r"TANDEM_DEMO_LOAD_RATE='fast' is not a number; use e\.g\. 2"):
        _load_rate(_context(tmp_path, TANDEM_DEMO_LOAD_RATE="fast"))
    with pytest.raises(StepFailed, match="out of range"):
        _load_rate(_context(tmp_path, TANDEM_DEMO_LOAD_RATE="500"))
    with pytest.raises(StepFailed, match="use phase, diurnal or constant"):
        _load_pattern(_context(tmp_path, TANDEM_DEMO_LOAD_PATTERN="spiky"))


def test_demo_summary_lists_the_pages_and_each_milestone(tmp_path):
    ctx = _context(tmp_path)
    ctx.topology = {"id": 3, "name": "demo"}
    ctx.marks = {"login page": 6.2, "topology ready": 19.04, "first live metrics": 21.5}
    summary = demo_summary(ctx, "admin")
    assert "Tandem demo is ready:" in summary
    assert "http://127.0.0.1:8000/topologies/3/" in summary
    assert "since start: login page 6.2 s, topology ready 19.0 s, first live metrics 21.5 s" in summary
    assert summary.rstrip().endswith("Press Ctrl-C to stop.")


def test_demo_summary_without_a_topology_says_tandem_is_ready(tmp_path):
    ctx = _context(tmp_path)
    ctx.marks = {"login page": 6.2}
    summary = demo_summary(ctx, "admin")
    assert "Tandem is ready:" in summary and "/topologies/" not in summary


def test_a_child_log_is_read_from_where_this_run_started(tmp_path):
    (tmp_path / "echo.log").write_text("ready from an earlier run\n")
    supervisor = Supervisor(log_dir=tmp_path, env={}, cwd=tmp_path)
    child = supervisor.spawn(
        "echo", [sys.executable, "-c", "import time; time.sleep(0.3); print('ready now')"]
    )
    try:
        assert not child.log_contains("ready")
        assert wait_for(lambda: child.log_contains("ready now"), timeout=10)
        assert child.log_text() == "ready now\n"
        assert "earlier" not in child.log_tail()
    finally:
        supervisor.stop_all(say=lambda line: None)


def test_an_optional_child_exiting_is_reported_once_and_is_not_fatal(tmp_path):
    supervisor = Supervisor(log_dir=tmp_path, env={}, cwd=tmp_path)
    essential = supervisor.spawn("web", [sys.executable, "-c", "import time; time.sleep(30)"])
    optional = supervisor.spawn("traffic", [sys.executable, "-c", "raise SystemExit(3)"], optional=True)
    try:
        optional.proc.wait(timeout=10)
        assert supervisor.first_dead() is None
        assert [child.name for child in supervisor.newly_dead_optional()] == ["traffic"]
        assert supervisor.newly_dead_optional() == []
        assert supervisor.names() == ["web", "traffic"]
    finally:
        begin = time.monotonic()
        supervisor.stop_all(say=lambda line: None)
    assert not essential.alive() and time.monotonic() - begin < 5
