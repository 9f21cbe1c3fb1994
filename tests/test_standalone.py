"""`python -m standalone` brings the product up on SQLite + embedded Redis and stops it cleanly; a second
run on the same state re-applies the demo to its fresh sandbox and survives its children dying (kill -9
of the embedded Redis and of the worker is reported, each is restarted with back-off, and the demo's
live telemetry flows again afterwards)."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from standalone.api import TandemApi
from tests.support import ROOT, free_port

pytestmark = pytest.mark.timeout(360)


class Run:
    """The standalone runner as a subprocess, its output collected line by line."""

    def __init__(self, state_dir: Path, port: int) -> None:
        self.state_dir = state_dir
        env = {k: v for k, v in os.environ.items() if k not in ("TANDEM_ADMIN_PASSWORD", "TANDEM_ADMIN_USER")}
        env.update({"TANDEM_STATE_DIR": str(state_dir), "TANDEM_PORT": str(port), "PYTHONUNBUFFERED": "1"})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "standalone"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 150) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.output)
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in the output:\n{self.output}\n{self.diagnostics()}")

    def diagnostics(self) -> str:
        """What the sandbox cluster shows, and the worker's last lines, for a failure message."""
        parts = []
        kubeconfig = self.state_dir / "sandbox.kubeconfig-https"
        if kubeconfig.exists():
            result = subprocess.run(
                ["kubectl", "--kubeconfig", str(kubeconfig), "get", "pods,events", "-A", "-o", "wide"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            parts.append(f"--- kubectl get pods,events -A:\n{result.stdout}{result.stderr}")
        for name in ("worker", "sandbox", "traffic"):
            log = self.state_dir / "logs" / f"{name}.log"
            if log.exists():
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
                parts.append(f"--- {name}.log (tail):\n{tail}")
        return "\n".join(parts)

    def terminate(self) -> float:
        begin = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        elapsed = time.monotonic() - begin
        time.sleep(0.2)  # let the reader thread take the last lines
        return elapsed


def _processes_with_state_dir(state_dir: Path) -> list[int]:
    marker = f"TANDEM_STATE_DIR={state_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _assert_the_printed_api_key_recipe_works(run: Run, base: str) -> None:
    """The summary says how to get a key for a script; what it says (`make api-key` runs
    `python -m standalone.apikey`) prints only a key, which the running demo accepts."""
    recipe = run.wait_for(r'make api-key ARGS="([^"]+)"').group(1)
    env = {k: v for k, v in os.environ.items() if k not in ("TANDEM_ADMIN_PASSWORD", "TANDEM_ADMIN_USER")}
    env["TANDEM_STATE_DIR"] = str(run.state_dir)
    made = subprocess.run(
        [sys.executable, "-m", "standalone.apikey", *recipe.split()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert re.fullmatch(r"tdm_m_[0-9A-Za-z]{36}", secret), made.stdout
    request = urllib.request.Request(  # noqa: S310 - loopback http only
        base + "/api/v1/topologies/", headers={"Authorization": f"Bearer {secret}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback http only
        assert response.status == 200
    refused = urllib.request.Request(  # noqa: S310 - loopback http only
        base + "/api/v1/clusters/", data=b"{}", method="POST", headers={"Authorization": f"Bearer {secret}"}
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(refused, timeout=10)  # noqa: S310 - loopback http only
    assert caught.value.code == 403  # the key holds only the scopes the recipe names


def _log_in(base: str, username: str, password: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/accounts/login/", timeout=10)
    assert page.status == 200
    html = page.read().decode()
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert match, "the login page has no CSRF token"
    data = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": match[1]}
    )
    request = urllib.request.Request(  # noqa: S310 - loopback http only
        base + "/accounts/login/", data=data.encode(), headers={"Referer": base + "/"}
    )
    landing = opener.open(request, timeout=10)
    assert landing.status == 200
    body = landing.read().decode()
    said = re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', body, flags=re.S)
    assert landing.url == base + "/", f"login did not land on the overview; it said: {said or body[:2000]}"
    return body


def _assert_demo_is_live(run: Run, url: str, user: str, password: str) -> None:
    """The demo steps' result as the API shows it: the sandbox registered and healthy, the demo
    topology deployed, and fresh telemetry with Ready pods, KV links up and traffic flowing."""
    run.wait_for(r"Tandem demo is ready:", timeout=120)
    api = TandemApi(url)
    api.login(user, password)
    clusters = {c["name"]: c for c in api.get("/api/v1/clusters/")["results"]}
    assert "sandbox" in clusters, f"the sandbox cluster is not registered: {sorted(clusters)}"
    topologies = [t for t in api.get("/api/v1/topologies/")["results"] if t["cluster_name"] == "sandbox"]
    assert topologies, "no topology on the sandbox cluster"
    demo = topologies[0]
    assert demo["deployed_revision"] is not None, f"{demo['name']} is not deployed"
    assert demo["deployed_revision"] == demo["current_revision"], demo
    assert f"/topologies/{demo['id']}/" in run.output, "the console does not show the topology page"

    # Cluster health is checked on a schedule; wait (bounded) for a check after registration.
    deadline = time.monotonic() + 20
    while clusters["sandbox"]["health_state"] != "healthy" and time.monotonic() < deadline:
        time.sleep(0.5)
        clusters = {c["name"]: c for c in api.get("/api/v1/clusters/")["results"]}
    assert clusters["sandbox"]["health_state"] == "healthy", clusters["sandbox"]

    latest: dict = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        latest = api.get(f"/api/v1/topologies/{demo['id']}/metrics/latest/")
        fresh = time.time() - latest["ts"] < 10
        totals = latest["totals"]
        if fresh and latest["pods"] and latest["links"] and totals["requests_ps"] and totals["gen_tps"]:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"no fresh telemetry with traffic within 20 s: {latest}")
    assert {pod["role"] for pod in latest["pods"]} == {"prefill", "decode"}, latest["pods"]
    assert all(pod["ready"] for pod in latest["pods"]), latest["pods"]
    assert all(link["state"] == "up" for link in latest["links"]), latest["links"]
    assert latest["totals"]["ttft_p50"] is not None, latest["totals"]


def _assert_killed_children_are_restarted_and_the_demo_goes_on(run: Run, url: str, password: str) -> None:
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
    topology = next(t for t in api.get("/api/v1/topologies/")["results"] if t["cluster_name"] == "sandbox")
    # The restarted worker collects again: a snapshot newer than the restart, with traffic.
    restarted_at = time.time()
    deadline = time.monotonic() + 45
    latest: dict = {}
    while time.monotonic() < deadline:
        latest = api.get(f"/api/v1/topologies/{topology['id']}/metrics/latest/")
        if latest["ts"] > restarted_at + 1 and latest["totals"]["requests_ps"]:
            return
        time.sleep(0.5)
    raise AssertionError(f"no fresh telemetry after the restarts: {latest}\n{run.diagnostics()}")


def test_standalone_serves_the_login_page_lets_the_admin_in_survives_its_children_and_stops_cleanly(tmp_path):
    state = tmp_path / "var"
    first = Run(state, free_port())
    try:
        url = first.wait_for(r"Tandem is running at (http://127\.0\.0\.1:\d+)/").group(1)
        user = first.wait_for(r"log in as: (\S+)").group(1)
        password = first.wait_for(r"password:\s+(\S+)").group(1)
        assert "admin admin: created" in first.output
        assert user == "admin"
        overview = _log_in(url, user, password)
        assert "<h1>Overview</h1>" in overview or "Overview" in overview
        _assert_demo_is_live(first, url, user, password)
        marks = first.wait_for(
            r"since start: login page [\d.]+ s, topology ready [\d.]+ s, first live metrics"
        )
        assert marks
        _assert_the_printed_api_key_recipe_works(first, url)
    finally:
        elapsed = first.terminate()
    assert first.proc.returncode == 0, first.output
    assert elapsed < 10, f"stopping took {elapsed:.1f} s:\n{first.output}"
    for name in ("traffic", "sandbox", "web", "worker", "beat", "redis"):
        assert f"tandem: stopped {name}" in first.output
    assert _processes_with_state_dir(state) == [], "a child process outlived the runner"
    secrets = state / "standalone.env"
    assert secrets.stat().st_mode & 0o777 == 0o600
    assert "SECRET_KEY=" in secrets.read_text() and "FIELD_ENCRYPTION_KEYS=" in secrets.read_text()

    # A second run keeps the database, but its sandbox starts empty: the demo topology is re-applied.
    second = Run(state, free_port())
    try:
        url = second.wait_for(r"Tandem is running at (http://127\.0\.0\.1:\d+)/").group(1)
        assert "admin admin: unchanged" in second.output
        assert second.wait_for(r"password:\s+(\S+)").group(1) == password
        second.wait_for(r"re-applied on the fresh sandbox", timeout=90)
        _assert_demo_is_live(second, url, user, password)
        _assert_killed_children_are_restarted_and_the_demo_goes_on(second, url, password)
    finally:
        second.terminate()
    assert second.proc.returncode == 0, second.output
    assert _processes_with_state_dir(state) == []


def test_standalone_refuses_a_port_in_use(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "standalone"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "TANDEM_STATE_DIR": str(tmp_path), "TANDEM_PORT": str(port)},
        )
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in result.stdout
