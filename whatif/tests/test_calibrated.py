"""The what-if runs on the topology's calibrated model when its calibration is ok (and recommends a split,
with the fit error beside it); without one it runs the nominal model, marks the table uncalibrated and
recommends nothing, saying why and what to run."""

from __future__ import annotations

import pytest

from perfmodel.sim import run_trace
from perfmodel.sim.evaluate import Bucket, trace_from_buckets
from whatif import plan, services, simulation
from whatif.models import WhatIfState


def _run(topology, operator):
    run = services.whatif_run_create(topology=topology, user=operator, window_seconds=300, splits=[(1, 1)])
    services.whatif_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    return run.result


@pytest.mark.django_db
def test_a_calibrated_topology_gets_a_recommendation_with_the_fit_error(
    make_topology, record, calibrated, operator
):
    topology = make_topology(budget=2)
    record(topology)
    calibrated(topology)
    result = _run(topology, operator)
    found = result["calibration"]
    assert result["calibrated"] is True and found["verdict"] == "ok", found["reasons"]
    assert found["perf"]["prefill_ms_per_token"] == pytest.approx(0.2, rel=0.1)
    assert found["perf"]["decode_step_ms"] == pytest.approx(20.0, rel=0.1)
    assert found["perf"]["decode_ms_per_seq"] == pytest.approx(1.5, rel=0.1)
    errors = {(e["role"], e["metric"]): e for e in found["fit_errors"]}
    assert 0 < errors["prefill", "ttft"]["mape"] < 0.1 and 0 < errors["decode", "tbt"]["mape"] < 0.1
    assert errors["prefill", "ttft"]["intervals"] == 12
    assert result["recommended"] == result["splits"][0] and "no_recommendation" not in result
    assert "calibrated on this topology's last 5 min (median fit error prefill TTFT" in result["note"]


@pytest.mark.django_db
def test_without_a_calibration_the_table_is_uncalibrated_and_nothing_is_recommended(
    make_topology, record, operator
):
    topology = make_topology(budget=2)
    record(topology)
    result = _run(topology, operator)
    assert result["calibrated"] is False and result["calibration"]["verdict"] == "not enough data"
    assert "recommended" not in result and len(result["splits"]) == 1  # the table is still there
    assert "not calibrated on this topology (not enough data)" in result["no_recommendation"]
    assert "run the verification probes' concurrency load for 2 minutes" in result["no_recommendation"]
    assert "nominal engine performance model (uncalibrated)" in result["note"]


def test_the_calibrated_rates_are_what_the_simulator_runs():
    """One minute at 1 req/s of 2,000-token prompts, TTFT target 300 ms: the nominal 0.08 ms per token
    prefills in ~160 ms and meets it; the calibrated 0.2 ms per token (~400 ms) misses it."""
    replay = simulation.Replay(
        buckets=[{"start": 0.0, "seconds": 60.0, "rate": 1.0, "prompt_len": 2000, "output_len": 4}],
        splits=[(1, 1)],
        ttft_ms=300.0,
        tbt_ms=200.0,
        note="",
        requests=60,
    )
    found = {
        "verdict": "ok",
        "perf": {"prefill_ms_per_token": 0.2},
        "parameters": {"hit_rate": {"value": 0.0}},
    }
    nominal = simulation.replay_split(replay, (1, 1))
    fitted = simulation.replay_split(plan.on_model(replay, found), (1, 1))
    assert nominal["ttft_attainment"] >= 0.9 and fitted["ttft_attainment"] <= 0.1, (nominal, fitted)
    assert plan.on_model(replay, {**found, "verdict": "poor fit"}) is replay  # a poor fit is not used


def test_the_calibrated_hit_rate_is_found_in_the_simulators_prefix_cache():
    bucket = Bucket(start=0.0, seconds=30.0, rate=2.0, prompt_len=1600, output_len=2)
    cluster = run_trace(trace_from_buckets([bucket], hit_rate=0.3), 1, 1)
    stats = next(i.engine.stats for i in cluster.instances.values() if i.role == "prefill")
    assert stats.prefix_hits / stats.prefix_queries == pytest.approx(0.3, abs=0.02)
