"""The verification run's P/D check end to end: a sandbox P/D topology behind the gateway's route, the
engines' counters collected every interval as beat does, the pd check judging what they say; with the
decode's connector silently delivering nothing (`kv_not_delivered`) the check fails naming the recompute."""

from __future__ import annotations

import threading

import requests
from django.conf import settings
from django.db import connection

from gateway.services import probe_run_execute, probe_run_start, route_update
from telemetry import services
from telemetry.tests.test_collect_sandbox import (  # noqa: F401 - the fixture
    base_url,
    deployed,
    pods_by_role,
    router_url,
)


class Collector(threading.Thread):
    """Telemetry collection every interval, in a thread with its own database connection (beat's)."""

    def __init__(self, topology_id: int) -> None:
        super().__init__(daemon=True)
        self.topology_id = topology_id
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(float(settings.TELEMETRY_INTERVAL_SECONDS)):
                services.telemetry_collect(topology_id=self.topology_id)
        finally:
            connection.close()

    def __enter__(self) -> Collector:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join(30)


def _verify(topology, actor):
    run = probe_run_start(topology=topology, kinds=["pd"], params={}, actor=actor)
    probe_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run, run.results[0]


def test_the_pd_check_passes_on_a_travelling_kv_and_fails_naming_a_silent_recompute_and_expired_kv(
    transactional_db,
    deployed,  # noqa: F811
    admin_user,
):
    topology, conn, namespace = deployed
    route_update(topology=topology, changes={"endpoint_url": router_url(conn, namespace)}, actor=admin_user)
    decodes = pods_by_role(conn, topology)["decode"]
    with Collector(topology.pk):
        run, pd = _verify(topology, admin_user)
        assert run.state == "passed" and pd["name"] == "pd" and pd["passed"], pd
        assert pd["summary"].startswith("the KV cache travels") and pd["figures"]["problems"] == []

        for pod in decodes:
            fault = {"kind": "kv_not_delivered"}
            requests.post(f"{base_url(pod)}/sandbox/faults", json=fault, timeout=5).raise_for_status()
        try:
            run, pd = _verify(topology, admin_user)
        finally:
            for pod in decodes:
                requests.delete(f"{base_url(pod)}/sandbox/faults", timeout=5)
        assert run.state == "failed" and not pd["passed"], pd
        assert "silent prefill recompute" in pd["summary"], pd
        assert "decode_recompute" in pd["figures"]["problems"], pd
        diagnosis = " ".join(pd["diagnosis"])
        assert "decode recomputed" in diagnosis and "kv_transfer_config" in diagnosis, diagnosis

        # KV that expires on the prefill before the decode pulls it. This pair moves KV over Mooncake, which
        # counts no expiry (vllm:nixl_num_kv_expired_reqs is NIXL's; telemetry/tests/test_datapath.py names
        # it from there): what shows is the decode's failed pulls, with no request failing, and its recompute.
        prefills = pods_by_role(conn, topology)["prefill"]
        for pod in prefills:
            fault = {"kind": "kv_expire"}
            requests.post(f"{base_url(pod)}/sandbox/faults", json=fault, timeout=5).raise_for_status()
        try:
            run, pd = _verify(topology, admin_user)
        finally:
            for pod in prefills:
                requests.delete(f"{base_url(pod)}/sandbox/faults", timeout=5)
    assert run.state == "failed" and not pd["passed"], pd
    assert {"silent_transfer_failures", "decode_recompute"} <= set(pd["figures"]["problems"]), pd
    assert "KV transfers failing silently" in pd["summary"], pd
