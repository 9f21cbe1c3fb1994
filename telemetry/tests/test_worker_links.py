"""The real path for KV links: a Celery worker process collects a sandbox topology every interval (as
beat's collect_all would enqueue it), reads the engines' metrics, probes each pair and reads the pods'
logs through the API server; a link fault turns that link red, explained, by the second collection
after it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from django.conf import settings

from telemetry.models import LatestSnapshot
from telemetry.tasks import collect_topology
from telemetry.tests.test_collect_sandbox import deployed, pods_by_role
from tests.support import celery_worker, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["deployed"]


def latest(topology_id: int) -> dict | None:
    row = LatestSnapshot.objects.filter(topology_id=topology_id).first()
    return row.data if row else None


def collect_in_worker(topology_id: int, after: float, worker, timeout: float = 30.0) -> dict:
    """Enqueue one collection (as beat would) and wait for the worker's snapshot newer than ``after``."""
    collect_topology.apply_async(args=[topology_id], queue="telemetry")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert worker.poll() is None, "the Celery worker exited"
        snapshot = latest(topology_id)
        if snapshot is not None and snapshot["ts"] > after:
            return snapshot
        time.sleep(0.05)
    raise AssertionError(f"no collection by the worker within {timeout:.0f} s")


def fault(*args: str) -> None:
    """``python -m sandbox fault ...``, the sandbox's fault command."""
    subprocess.run(
        [sys.executable, "-m", "sandbox", "fault", *args], check=True, capture_output=True, timeout=30
    )


def link_of(snapshot: dict, prefill: str, decode: str) -> dict:
    return next(link for link in snapshot["links"] if (link["prefill"], link["decode"]) == (prefill, decode))


def test_a_link_fault_is_red_and_explained_within_two_intervals_in_a_real_worker(deployed):
    topology, conn, _ = deployed
    pods = pods_by_role(conn, topology)
    prefill, decode = pods["prefill"][0], pods["decode"][0]
    interval = float(settings.TELEMETRY_INTERVAL_SECONDS)
    with celery_worker(subprocess_env(), queues="telemetry") as worker:
        snapshot = collect_in_worker(topology.pk, 0.0, worker, timeout=60)  # includes worker start-up
        for _ in range(2):
            time.sleep(interval)
            snapshot = collect_in_worker(topology.pk, snapshot["ts"], worker)
        before = link_of(snapshot, prefill.name, decode.name)
        assert before["state"] == "up", before
        assert {"probe", "metrics"} <= {source["kind"] for source in before["sources"]}

        port = str(decode.container_ports[0] if decode.container_ports else 8000)
        where = ["--pod-ip", decode.ip, "--port", port]
        fault(*where, "--kind", "link_down", "--peer", prefill.name)  # as an operator would
        faulted_at = time.time()
        try:
            states = []
            for _ in range(2):  # two intervals, as beat would schedule them
                time.sleep(interval)
                snapshot = collect_in_worker(topology.pk, snapshot["ts"], worker)
                states.append(link_of(snapshot, prefill.name, decode.name))
                if states[-1]["state"] == "down":
                    break
        finally:
            fault(*where, "--clear")
        link = states[-1]
        assert link["state"] == "down", states
        assert snapshot["ts"] - faulted_at <= 2 * interval + 1.5  # red within two intervals
        assert prefill.name in link["reason"] and decode.name in link["reason"]
        assert "cmpl-tandem-probe-" in link["reason"]  # the connector's own line about Tandem's probe
        assert link["reason"] in "; ".join(snapshot["health"]["reasons"])
        assert all(p["ready"] for p in snapshot["pods"])

        recovered = None
        for _ in range(4):
            time.sleep(interval)
            snapshot = collect_in_worker(topology.pk, snapshot["ts"], worker)
            recovered = link_of(snapshot, prefill.name, decode.name)
            if recovered["state"] == "up":
                break
        assert recovered is not None and recovered["state"] == "up", recovered
