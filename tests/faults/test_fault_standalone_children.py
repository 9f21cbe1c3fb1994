"""`make demo` survives its children dying: kill -9 of the embedded Redis and of the worker is reported,
each is restarted with back-off, the web server and sandbox keep running, and the demo's live telemetry
flows again afterwards. Also the back-off itself, and deploy_demo's log line parsed to the right topology."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from standalone.api import TandemApi
from standalone.steps import demo_topology_name
from standalone.supervisor import Supervisor, backoff_seconds
from tests.support import free_port
from tests.test_standalone import Run


@pytest.mark.timeout(240)
def test_killed_redis_and_worker_are_restarted_and_the_demo_goes_on(tmp_path):
    run = Run(tmp_path / "var", free_port())
    try:
        url = run.wait_for(r"Tandem is running at (http://127\.0\.0\.1:\d+)/").group(1)
        password = run.wait_for(r"password:\s+(\S+)").group(1)
        run.wait_for(r"Tandem demo is ready:", timeout=150)
        redis_pid = int(run.wait_for(r"tandem: redis on 127\.0\.0\.1:\d+ \(pid (\d+)\)").group(1))
        worker_pid = int(run.wait_for(r"worker \(pid (\d+)\)").group(1))

        os.kill(redis_pid, signal.SIGKILL)
        run.wait_for(rf"tandem: redis \(pid {redis_pid}\) exited with -9; restarting in 1 s", timeout=10)
        run.wait_for(rf"tandem: redis restarted \(pid \d+, was {redis_pid}\)", timeout=10)
        os.kill(worker_pid, signal.SIGKILL)
        run.wait_for(rf"tandem: worker \(pid {worker_pid}\) exited with -9; restarting in 1 s", timeout=10)
        run.wait_for(rf"tandem: worker restarted \(pid \d+, was {worker_pid}\)", timeout=10)
        assert run.proc.poll() is None, "the runner stopped:\n" + run.output
        assert "tandem: stopped" not in run.output, "children were stopped after a crash"

        api = TandemApi(url)
        api.login("admin", password)
        topology = next(
            t for t in api.get("/api/v1/topologies/")["results"] if t["cluster_name"] == "sandbox"
        )
        # The restarted worker collects again: a snapshot newer than the restart, with traffic.
        restarted_at = time.time()
        deadline = time.monotonic() + 45
        latest: dict = {}
        while time.monotonic() < deadline:
            latest = api.get(f"/api/v1/topologies/{topology['id']}/metrics/latest/")
            if latest["ts"] > restarted_at + 1 and latest["totals"]["requests_ps"]:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"no fresh telemetry after the restarts: {latest}\n{run.diagnostics()}")
    finally:
        run.terminate()
    assert run.proc.returncode == 0, run.output


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
