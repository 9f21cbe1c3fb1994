"""The verification probes end to end against simulated P/D stacks, and their judgements."""

from __future__ import annotations

import time

import pytest

from gateway import probes
from gateway.models import ProbeRun
from gateway.services import probe_run_execute, probe_run_start, route_update
from gateway.tests.conftest import FALLBACK_MODEL, MODEL, StackThread


def test_judge_prefix_passes_on_a_drop_and_explains_a_miss():
    assert probes.judge_prefix([400, 150, 140, 160], margin=0.3, hit_before=0.1, hit_after=0.6)[0]
    ok, _text, causes = probes.judge_prefix([400, 390, 410], margin=0.3, hit_before=0.2, hit_after=0.2)
    assert not ok and "prefix caching is disabled" in " ".join(causes)
    assert "did not rise" in causes[1]
    assert not probes.judge_prefix([400, None], margin=0.3, hit_before=None, hit_after=None)[0]
    # a slow first request alone (connection set-up) is not reuse: the fresh-prefix control says so
    assert not probes.judge_prefix([400, 200, 210], margin=0.3, hit_before=None, hit_after=None, control=210)[
        0
    ]
    assert probes.judge_prefix([400, 100, 110], margin=0.3, hit_before=None, hit_after=None, control=390)[0]


def _run(topology, admin_user, kinds, params=None):
    run = probe_run_start(topology=topology, kinds=kinds, params=params or {}, actor=admin_user)
    probe_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run, {r["name"]: r for r in run.results}


def test_smoke_prefix_and_concurrency_pass_on_a_healthy_stack(make_topology, admin_user, cluster_stack):
    topology = make_topology()
    route_update(topology=topology, changes={"endpoint_url": cluster_stack.url}, actor=admin_user)
    run, results = _run(
        topology,
        admin_user,
        ["smoke", "prefix", "concurrency"],
        {"concurrency_clients": 4, "concurrency_seconds": 2},
    )
    assert results["smoke"]["passed"], results["smoke"]
    assert results["prefix"]["passed"], results["prefix"]
    assert len(results["prefix"]["figures"]["ttft_ms"]) == 5
    concurrency = results["concurrency"]
    assert concurrency["passed"] and concurrency["figures"]["requests"] > 4
    assert concurrency["figures"]["ttft_p95_ms"] is not None
    assert run.state == "passed"
    # The probes' requests are the gateway's traffic too: recorded, flagged, charted as verification.
    from gateway.models import GatewayRequest
    from gateway.selectors import gateway_series

    records = GatewayRequest.objects.filter(topology=topology)
    made = 1 + 1 + 5 + 1 + concurrency["figures"]["requests"]  # smoke, warm-up, prefix, control, load
    assert records.count() == records.filter(probe=True, key_id=None).count() == made
    assert records.filter(stream=False, ttft_ms__isnull=False).count() == 0  # smoke: whole, no TTFT
    end = time.time()
    out = gateway_series(topology_id=topology.pk, start=end - 600, end=end, step=600)
    assert out["totals"]["verification"] == made and out["totals"]["cluster"] == 0
    assert any(v is not None for v in out["series"]["ttft.p50"])  # the streamed probes have a TTFT


def test_prefix_probe_fails_and_says_why_when_prefix_caching_is_off(make_topology, admin_user):
    with StackThread(MODEL, args=(MODEL, "--no-enable-prefix-caching")) as cold:
        topology = make_topology()
        route_update(topology=topology, changes={"endpoint_url": cold.url}, actor=admin_user)
        run, results = _run(topology, admin_user, ["prefix"])
    assert run.state == "failed"
    assert not results["prefix"]["passed"]
    assert any("prefix caching is disabled" in line for line in results["prefix"]["diagnosis"]), results


def test_smoke_failure_is_diagnosed_in_words(make_topology, admin_user):
    from tests.support import closed_port

    topology = make_topology()
    route_update(
        topology=topology, changes={"endpoint_url": f"http://127.0.0.1:{closed_port()}"}, actor=admin_user
    )
    run, results = _run(topology, admin_user, ["smoke"])
    assert run.state == "failed"
    assert "cannot connect" in " ".join(results["smoke"]["diagnosis"])
    assert "no fallback" in " ".join(results["smoke"]["diagnosis"])


def test_runs_leave_no_http_session_or_recorder_behind_in_the_worker(make_topology, admin_user):
    """Each run has an event loop of its own; what it opened per loop is closed and dropped with it
    (a session left in the table would be handed to a later loop at the same address)."""
    from gateway import recorder, upstream
    from tests.support import closed_port

    topology = make_topology()
    route_update(
        topology=topology, changes={"endpoint_url": f"http://127.0.0.1:{closed_port()}"}, actor=admin_user
    )
    sessions, recorders = dict(upstream._sessions), dict(recorder._recorders)
    for _ in range(3):
        run, _results = _run(topology, admin_user, ["smoke"])
        assert run.state == "failed"
    assert upstream._sessions == sessions and recorder._recorders == recorders


def test_fallback_comparison_side_by_side(make_topology, admin_user, cluster_stack, fallback_stack):
    topology = make_topology()
    route_update(
        topology=topology,
        changes={
            "endpoint_url": cluster_stack.url,
            "fallback_base_url": f"{fallback_stack.url}/v1",
            "fallback_model": FALLBACK_MODEL,
        },
        actor=admin_user,
    )
    _, results = _run(topology, admin_user, ["fallback"])
    figures = results["fallback"]["figures"]
    assert results["fallback"]["passed"]
    assert figures["cluster"]["status"] == figures["fallback"]["status"] == 200
    assert figures["cluster"]["text"] and figures["fallback"]["text"]


def test_a_second_run_waits_for_the_first(make_topology, admin_user):
    from controlplane.api.errors import Conflict

    topology = make_topology()
    probe_run_start(topology=topology, kinds=["smoke"], params={}, actor=admin_user)
    with pytest.raises(Conflict):
        probe_run_start(topology=topology, kinds=["smoke"], params={}, actor=admin_user)
    assert ProbeRun.objects.filter(topology=topology).count() == 1


def test_bad_probe_settings_name_the_field(make_topology, admin_user):
    from controlplane.api.errors import DomainError

    topology = make_topology()
    with pytest.raises(DomainError) as caught:
        probe_run_start(
            topology=topology, kinds=["smoke"], params={"concurrency_clients": 1000}, actor=admin_user
        )
    assert "concurrency_clients" in caught.value.fields
    with pytest.raises(DomainError):
        probe_run_start(topology=topology, kinds=["nope"], params={}, actor=admin_user)


def test_the_cluster_leg_of_the_fallback_comparison_speaks_of_the_cluster(
    make_topology, admin_user, fallback_stack
):
    """A failing cluster beside a configured fallback: the cluster leg says why it failed, never that the
    topology has no fallback (the leg is tried without it on purpose)."""
    from tests.support import closed_port

    topology = make_topology()
    route_update(
        topology=topology,
        changes={
            "endpoint_url": f"http://127.0.0.1:{closed_port()}",
            "fallback_base_url": f"{fallback_stack.url}/v1",
            "fallback_model": FALLBACK_MODEL,
        },
        actor=admin_user,
    )
    _, results = _run(topology, admin_user, ["fallback"])
    result = results["fallback"]
    assert not result["passed"]
    assert result["figures"]["fallback"]["status"] == 200
    diagnosis = " ".join(result["diagnosis"])
    assert "cluster: the cluster failed: cannot connect" in diagnosis, diagnosis
    assert "no fallback" not in diagnosis, diagnosis


def _links_snapshot(ts: float, observed_at: float | None, state: str = "up") -> dict:
    return {
        "ts": ts,
        "interval_s": 2.0,
        "links": [{"prefill": "p-0", "decode": "d-0", "state": state, "observed_at": observed_at}],
    }


def test_the_links_probe_passes_on_fresh_up_links_only():
    from gateway.probes import judge_links

    now = 1000.0
    fresh = judge_links(_links_snapshot(now - 1, now - 1), now)
    assert fresh.passed and fresh.summary == "1 of 1 KV links healthy"
    # telemetry stopped: the last "up" is a minute old and proves nothing now
    stopped = judge_links(_links_snapshot(now - 60, now - 60), now)
    assert not stopped.passed and stopped.summary == "the link states are 60 s old"
    assert "Celery worker and beat" in stopped.diagnosis[0]
    # collected, but no source has seen this link for a while
    unseen = judge_links(_links_snapshot(now - 1, now - 30), now)
    assert not unseen.passed and "up, but last seen 30 s ago" in unseen.diagnosis[0]
    down = judge_links(_links_snapshot(now - 1, now - 1, state="down"), now)
    assert not down.passed and down.diagnosis[0].startswith("p-0 → d-0: down")
    assert not judge_links(None, now).passed


def test_verification_runs_neither_open_the_gateways_breaker_nor_are_skipped_by_it(make_topology, admin_user):
    """Probes run in the worker, beside the gateway's breakers: failing runs must not open the breaker
    that guards applications' requests, and an open breaker must not skip the cluster a probe tests."""
    from gateway import failover
    from gateway.models import BreakerEvent
    from gateway.routes import load_table
    from tests.support import closed_port

    topology = make_topology()
    route_update(
        topology=topology, changes={"endpoint_url": f"http://127.0.0.1:{closed_port()}"}, actor=admin_user
    )
    for _ in range(4):  # more failures than it takes to open a breaker
        _, results = _run(topology, admin_user, ["smoke"])
        assert "cannot connect" in " ".join(results["smoke"]["diagnosis"]), results
    entry = next(e for e in load_table("t").entries() if e.topology_id == topology.pk)
    assert failover.breaker_for(entry).state == "closed"
    assert not BreakerEvent.objects.filter(topology=topology).exists()
    for _ in range(entry.breaker_failures):  # the applications' traffic opened it
        failover.breaker_for(entry).failure(0.0, "down")
    _, results = _run(topology, admin_user, ["smoke"])
    diagnosis = " ".join(results["smoke"]["diagnosis"])
    assert "cannot connect" in diagnosis and "circuit open" not in diagnosis, results
