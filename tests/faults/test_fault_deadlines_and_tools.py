"""Deadlines on engine scrapes (an engine that accepts and never answers costs one timeout, the others'
data still arrives), and the sandbox's fault CLI driving its API server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from contextlib import closing

import pytest

from sandbox.testing import SandboxCluster
from telemetry.assemble import PodTarget
from telemetry.scrape import ScrapeRequest, scraper
from tests.support import ROOT


def _silent_server() -> tuple[socket.socket, int]:
    """Accepts connections and never answers (a hung engine)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return server, int(server.getsockname()[1])


def _metrics_server() -> tuple[socket.socket, int]:
    """Answers every request with a tiny vLLM exposition."""
    body = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with closing(conn):
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    threading.Thread(target=serve, daemon=True).start()
    return server, int(server.getsockname()[1])


def test_a_hung_engine_costs_one_scrape_deadline_and_the_others_still_arrive():
    hung, hung_port = _silent_server()
    live, live_port = _metrics_server()
    try:
        requests = [
            ScrapeRequest(PodTarget("decode-0", "decode", "127.0.0.1", hung_port, True, "Running")),
            ScrapeRequest(PodTarget("prefill-0", "prefill", "127.0.0.1", live_port, True, "Running")),
        ]
        started = time.monotonic()
        results = {r.target.name: r for r in scraper().scrape(requests, timeout_s=0.5)}
        took = time.monotonic() - started
    finally:
        hung.close()
        live.close()
    assert took < 2.0, f"one hung engine held the scrape {took:.1f} s"
    assert results["decode-0"].raw is None and "no answer" in (results["decode-0"].error or "")
    assert results["prefill-0"].error is None and results["prefill-0"].raw is not None


def test_the_scrape_deadline_is_a_setting(settings):
    from clusters.metrics import MetricsSettings
    from telemetry.collect import collect_results

    settings.TELEMETRY_SCRAPE_TIMEOUT_SECONDS = 0.3
    hung, port = _silent_server()
    try:
        target = PodTarget("decode-0", "decode", "127.0.0.1", port, True, "Running")

        class _Topology:
            kv_connector = "none"
            namespace = "default"

        started = time.monotonic()
        (result,), _, _ = collect_results(
            settings=MetricsSettings(source="direct"),
            conn=None,  # type: ignore[arg-type]
            topology=_Topology(),  # type: ignore[arg-type]
            targets=[target],
            state={"backoff": {}},
            now=time.time(),
            interval=10.0,
        )
        took = time.monotonic() - started
    finally:
        hung.close()
    assert took < 1.5 and "within 0.3 s" in (result.error or ""), (took, result.error)


@pytest.fixture(scope="module")
def sandbox():
    with SandboxCluster(nodes=1, accelerators=["nvidia.com/gpu=2"]) as cluster:
        yield cluster


def _fault(sandbox: SandboxCluster, *args: str) -> tuple[int, object]:
    result = subprocess.run(
        [sys.executable, "-m", "sandbox", "fault", "--kubeconfig", str(sandbox.kubeconfig_path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else result.stderr


def test_fault_cli_injects_shows_and_clears_api_server_faults(sandbox):
    code, added = _fault(
        sandbox, "--kind", "throttle", "--retry-after", "1", "--count", "2", "--path", "/api"
    )
    assert code == 0 and added["fault"]["kind"] == "throttle" and added["fault"]["count"] == 2
    status = subprocess.run(
        [
            "/usr/bin/kubectl",
            "--kubeconfig",
            str(sandbox.kubectl_kubeconfig_path),
            "get",
            "--raw",
            "/api/v1/nodes",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert status.returncode == 0  # kubectl waits out Retry-After and retries, as client-go does
    code, shown = _fault(sandbox, "--show")
    assert code == 0 and isinstance(shown, dict)
    code, cleared = _fault(sandbox, "--clear")
    assert code == 0 and cleared == {"cleared": len(shown["faults"])}
    code, refused = _fault(sandbox, "--kind", "freeze", "--path", "no-slash")
    assert code == 1 and refused["error"]["field"] == "path"
