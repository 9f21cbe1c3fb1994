"""The standalone runner's supervisor: a crashing child is restarted with growing back-off, nothing is
restarted once it stops, and deploy_demo's log line is parsed to the right topology. The whole demo
surviving kill -9 of its Redis and worker is in tests/test_standalone.py (its second run)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from standalone.steps import demo_topology_name
from standalone.supervisor import Supervisor, backoff_seconds


def test_a_crashing_child_is_restarted_with_growing_back_off_and_each_restart_is_said(tmp_path):
    said: list[str] = []
    supervisor = Supervisor(log_dir=tmp_path, env=dict(os.environ), cwd=tmp_path)
    child = supervisor.spawn("flaky", [sys.executable, "-c", "print('up'); raise SystemExit(7)"])
    try:
        child.proc.wait(timeout=10)
        now = time.monotonic()
        assert supervisor.restart_crashed(say=said.append, now=now) == []  # scheduled, not yet due
        assert "flaky (pid" in said[0] and "exited with 7; restarting in 1 s (restart 1)" in said[0]
        assert supervisor.restart_crashed(say=said.append, now=now + 0.5) == []
        assert supervisor.restart_crashed(say=said.append, now=now + 1.0) == [child]
        assert said[-1].startswith("tandem: flaky restarted (pid")
        child.proc.wait(timeout=10)
        supervisor.restart_crashed(say=said.append, now=now + 1.1)
        assert "restarting in 2 s (restart 2)" in said[-1]
        assert (tmp_path / "flaky.log").read_text().count("up") == 2  # both runs append to one log
    finally:
        supervisor.stop_all(say=lambda line: None)
    assert [backoff_seconds(n) for n in (1, 2, 3, 4, 5, 6, 7)] == [1, 2, 4, 8, 16, 30, 30]


def test_supervisor_restarts_nothing_once_it_is_stopping(tmp_path):
    supervisor = Supervisor(log_dir=tmp_path, env=dict(os.environ), cwd=tmp_path)
    child = supervisor.spawn("once", [sys.executable, "-c", "raise SystemExit(1)"])
    child.proc.wait(timeout=10)
    supervisor.stop_all(say=lambda line: None)
    assert supervisor.restart_crashed(say=lambda line: None, now=time.monotonic() + 100) == []


@pytest.mark.parametrize(
    "line",
    [
        "demo topology deepseek-v2-lite: deployment #3 queued",
        "demo topology deepseek-v2-lite already running revision 2",
        "demo topology deepseek-v2-lite deployed: revision 1, 2/2 pods Ready",
        "demo topology deepseek-v2-lite: deployment #4 still waiting",
    ],
)
def test_deploy_demo_lines_name_the_topology_without_punctuation(line):
    assert demo_topology_name(line) == "deepseek-v2-lite"


def test_a_line_without_a_topology_names_none():
    assert demo_topology_name("") is None and demo_topology_name("nothing to see") is None
