"""What failing over needs is made when the gateway starts, not at the first failover.

A running gateway (uvicorn) in front of a cluster that answers 500 and a fallback (test_fallback_faults'
scripted servers): after start-up and one answer from the cluster, a burst of failovers (each a kept
trace, and the breaker's changes announced) starts no thread and opens no database connection. Before,
the first failover made the process start worker threads up to the executor's limit, each with its own
database and Redis connections and malloc arena, kept for the process's life.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import pytest

from gateway.tests.conftest import FALLBACK_MODEL, MODEL
from gateway.tests.test_fallback_faults import Servers


@pytest.fixture(scope="module")
def upstreams() -> Iterator[Servers]:
    running = Servers()
    running.start()
    yield running
    running.stop()


def _process_on(port: int) -> psutil.Process:
    for connection in psutil.net_connections(kind="tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port and connection.pid:
            return psutil.Process(connection.pid)
    raise AssertionError(f"no process listens on port {port}")


def _database_connections(process: psutil.Process) -> int:
    from django.db import connection

    port = int(connection.settings_dict.get("PORT") or 5432)
    return sum(1 for c in process.net_connections(kind="tcp") if c.raddr and c.raddr.port == port)


def test_the_first_failovers_start_no_thread_and_open_no_database_connection(
    upstreams, make_topology, inference_key, admin_user, tmp_path
):
    import requests

    from gateway.services import route_update
    from gateway.tests.conftest import running_gateway
    from tests.support import wait_until

    upstreams.cluster.script.clear()
    upstreams.cluster.gate = asyncio.Event()
    upstreams.loop.call_soon_threadsafe(upstreams.cluster.gate.set)
    topology = make_topology()
    changes = {
        "endpoint_url": upstreams.urls["cluster"],
        "fallback_base_url": upstreams.urls["fallback"] + "/v1",
        "fallback_model": FALLBACK_MODEL,
    }
    route_update(topology=topology, changes=changes, actor=admin_user)
    issued = inference_key()
    auth = {"Authorization": f"Bearer {issued.secret}"}
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}

    def post(base: str) -> tuple[int, str]:
        answer = requests.post(f"{base}/v1/chat/completions", json=body, headers=auth, timeout=15)
        return answer.status_code, answer.headers.get("x-tandem-backend", answer.text[:200])

    log = tmp_path / "gateway.log"
    with running_gateway(log) as base:
        gateway = _process_on(int(base.rsplit(":", 1)[1]))
        assert post(base) == (200, "cluster")
        time.sleep(2.5)  # the first records and traces written, the start-up's connections made
        threads, connections = gateway.num_threads(), _database_connections(gateway)
        upstreams.cluster.script.extend(["500"] * 80)  # the breaker opens too: its change is announced
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda _: post(base), range(80)))
        assert answers == [(200, "fallback")] * 80, answers
        wait_until(lambda: "breaker of topology" in log.read_text(), 10, "the breaker's change")
        time.sleep(2.5)  # the failovers' records and kept traces written
        assert gateway.num_threads() == threads, log.read_text()[-2000:]
        assert _database_connections(gateway) <= connections
