"""The rebalancing benchmark's own pieces (bench/rebalance_fair.py, rebalance_baselines.py,
rebalance_oracle.py): the engine profile the planner and the Dynamo baseline share, the rows the bench
runs, and the hindsight oracle that clones the simulation to pick each window's split."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from rebalance_baselines import decode_best_thpt, decode_itl_s, engine_profile, prefill_thpt
from rebalance_fair import EXTRA, TUNED, make_controller, overrides, policies
from rebalance_oracle import Oracle, switch
from rebalance_planner import PERF, Tandem

from perfmodel.sim import SimCluster, SimRequest, run_virtual
from perfmodel.sim.evaluate import attainment


def test_the_decode_profile_is_the_largest_batch_within_the_tbt_target():
    prefill_tps, decode_tps = engine_profile(PERF, [SimRequest(0.0, 1000, 300)], 50.0)
    # 64 sequences (max_num_seqs) step in 12.5 + 0.25 × 64 = 28.5 ms, within 50 ms: 64 / 0.0285 s
    assert decode_tps == pytest.approx(PERF.max_num_seqs / decode_itl_s(PERF, PERF.max_num_seqs))
    assert decode_tps == pytest.approx(2245.6, abs=0.1)
    # within a 20 ms TBT only 30 sequences fit a step (12.5 + 0.25 × 30 = 20 ms)
    assert engine_profile(PERF, [SimRequest(0.0, 1000, 300)], 20.0)[1] == pytest.approx(30 / 0.020)
    assert prefill_tps == pytest.approx(prefill_thpt(PERF, 1000))


def test_a_context_that_fills_the_kv_cache_lowers_the_decode_profile():
    long = [SimRequest(0.0, 8000, 1000)]  # context 8500: 32768 × 16 KV tokens hold 61 sequences
    _, decode_tps = engine_profile(PERF, long, 50.0)
    assert decode_tps == pytest.approx(61 / decode_itl_s(PERF, 61))
    assert decode_tps < engine_profile(PERF, [SimRequest(0.0, 1000, 300)], 50.0)[1]
    assert decode_tps == decode_best_thpt(PERF, 0.050, 8500)


def test_the_prefill_profile_counts_only_the_uncached_prompt():
    cached = [SimRequest(0.0, 4000, 100, prefix=1, prefix_len=3900)]  # 100 tokens to compute
    plain = [SimRequest(0.0, 100, 100)]
    assert engine_profile(PERF, cached, 50.0)[0] == engine_profile(PERF, plain, 50.0)[0]
    # a 100-token prompt pays the step overhead on few tokens: less per second than a full batch
    assert engine_profile(PERF, plain, 50.0)[0] < engine_profile(PERF, [SimRequest(0.0, 2048, 1)], 50.0)[0]


def test_the_extra_rows_run_only_when_named():
    assert policies(8) == [f"static-{p}" for p in range(1, 8)] + ["reactive", "dynamo-sla", "tandem"]
    assert not set(EXTRA) & set(policies(8))
    assert policies(8, "tandem,oracle,tandem-unprofiled") == ["tandem", "tandem-unprofiled", "oracle"]


def test_the_bench_gives_tandem_the_engine_profile_and_not_the_unprofiled_row():
    requests = [SimRequest(0.1 * i, 800, 20) for i in range(20)]
    cluster = SimCluster(4, 4, PERF, budget=8)
    profiled = make_controller("tandem", cluster, requests, 8)
    unprofiled = make_controller("tandem-unprofiled", cluster, requests, 8)
    assert isinstance(profiled, Tandem) and isinstance(unprofiled, Tandem)
    assert (profiled.params.prefill_tokens_per_s, profiled.params.decode_tokens_per_s) == pytest.approx(
        engine_profile(PERF, requests, 50.0)
    )
    assert profiled.params.decode_tokens_per_s == pytest.approx(2245.6, abs=0.1)
    assert (unprofiled.params.prefill_tokens_per_s, unprofiled.params.decode_tokens_per_s) == (0.0, 0.0)
    assert profiled.limits.budget == unprofiled.limits.budget == 8
    assert isinstance(make_controller("oracle", cluster, requests, 8), Oracle)
    assert make_controller("static-3", cluster, requests, 8) is None


def test_the_variant_rows_keep_the_profile_and_change_only_what_they_name(monkeypatch):
    requests = [SimRequest(0.1 * i, 800, 20) for i in range(20)]
    cluster = SimCluster(4, 4, PERF, budget=8)
    monkeypatch.setitem(TUNED, "flap_window_seconds", 45.0)
    profiled = make_controller("tandem", cluster, requests, 8)
    no_forecast = make_controller("tandem-no-forecast", cluster, requests, 8)
    tuned = make_controller("tandem-tuned", cluster, requests, 8)
    assert isinstance(profiled, Tandem) and isinstance(no_forecast, Tandem) and isinstance(tuned, Tandem)
    assert profiled.params.forecast_split and not no_forecast.params.forecast_split
    assert tuned.params.flap_window_seconds == 45.0 != profiled.params.flap_window_seconds
    for variant in (no_forecast, tuned):
        assert variant.params.decode_tokens_per_s == profiled.params.decode_tokens_per_s > 0


def test_tuned_params_are_read_as_numbers_and_booleans():
    assert overrides("flap_window_seconds=45, forecast_split=False,") == {
        "flap_window_seconds": 45.0,
        "forecast_split": False,
    }
    assert overrides("") == {}
    with pytest.raises(ValueError):
        overrides("flap_window_seconds=soon")


def test_a_free_switch_moves_the_least_busy_instances_at_once():
    cluster = SimCluster(2, 2, PERF, budget=4)
    trace = [SimRequest(0.0, 200, 10)]

    def controller(view):
        assert switch(cluster, (3, 1)) and not switch(cluster, (3, 1))
        return None

    run_virtual(cluster.run([*trace, SimRequest(6.0, 200, 10)], controller, 5.0))
    assert (cluster.count("prefill"), cluster.count("decode")) == (3, 1)
    assert cluster.timeline[-1][1:] == (3, 1, "controller") and cluster.role_changes == 1
    assert cluster.moves == 0 and cluster.switches == 0  # no drain, no switch time, no instance replaced


def _prefill_heavy() -> list[SimRequest]:
    return [SimRequest(0.2 * i, 6000, 20) for i in range(150)]  # 30k prompt tok/s: more than 2 prefills


def _oracle_run(
    trace: list[SimRequest], prefill: int, decode: int, search: str = "all"
) -> tuple[SimCluster, Oracle]:
    """A run of the trace under the oracle from prefill/decode; the oracle's clones have reported."""
    budget = prefill + decode
    cluster = SimCluster(prefill, decode, PERF, budget=budget, model_load_seconds=0.0, in_place=True)
    oracle = Oracle(cluster, trace, budget, 1500.0, 50.0, search=search)
    try:
        run_virtual(cluster.run(trace, oracle, 5.0))
    finally:
        oracle.finish()
    return cluster, oracle


def test_the_oracle_picks_the_split_the_next_window_needs_from_clones_of_the_run():
    trace = _prefill_heavy()
    static = SimCluster(2, 2, PERF, budget=4, model_load_seconds=0.0, in_place=True)
    run_virtual(static.run(trace, None, 5.0))
    cluster, oracle = _oracle_run(trace, 2, 2)
    # the run itself went on after every clone reported: every request is there once
    assert sorted(o.at for o in cluster.outcomes) == [r.at for r in trace]
    assert oracle.clones >= 3  # 2P/2D first, then every split of the budget
    assert oracle.decisions[0][:3] == (5.0, 3, 1)
    assert cluster.timeline[1] == (5.0, 3, 1, "controller")
    assert (
        attainment(cluster.outcomes, 1500.0, 50.0).both > 0.9 > attainment(static.outcomes, 1500.0, 50.0).both
    )


def test_the_oracle_keeps_a_split_that_already_serves_every_request_with_one_clone():
    trace = [SimRequest(0.5 * i, 500, 20) for i in range(40)]  # light: 2P/2D meets every SLO
    cluster, oracle = _oracle_run(trace, 2, 2)
    assert oracle.clones == len(oracle.decisions) >= 2
    assert all((p, d) == (2, 2) and met == scope for _, p, d, met, scope in oracle.decisions)
    assert [why for *_, why in cluster.timeline] == ["start"]


def test_the_oracles_climb_search_clones_fewer_splits_and_finds_the_same_split():
    trace = _prefill_heavy()
    (_, full), (_, climb) = (_oracle_run(trace, 2, 6, search) for search in ("all", "climb"))
    assert [d[1:3] for d in climb.decisions] == [d[1:3] for d in full.decisions]
    assert climb.clones < full.clones
