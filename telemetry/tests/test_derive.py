from __future__ import annotations

import math
import random

import pytest

from telemetry.derive import (
    histogram_delta,
    merge,
    merge_buckets,
    metrics,
    pod_window,
    quantile,
    topology_metrics,
)
from telemetry.parse import parse_metrics
from telemetry.tests.exposition import TTFT_BOUNDS, mindie_text, sglang_text, vllm_text

INF = math.inf


def test_quantile_interpolates_linearly_inside_the_bucket():
    # 10 observations in (0, 0.1], 10 in (0.1, 0.2]
    buckets = [(0.1, 10.0), (0.2, 20.0), (INF, 20.0)]
    assert quantile(buckets, 0.5) == pytest.approx(0.1)
    assert quantile(buckets, 0.25) == pytest.approx(0.05)
    assert quantile(buckets, 0.75) == pytest.approx(0.15)
    assert quantile(buckets, 0.95) == pytest.approx(0.19)


def test_quantile_in_the_inf_bucket_returns_the_highest_finite_bound():
    assert quantile([(0.1, 1.0), (0.5, 2.0), (INF, 10.0)], 0.99) == 0.5


def test_quantile_without_observations_is_none_not_zero():
    assert quantile([(0.1, 0.0), (INF, 0.0)], 0.5) is None
    assert quantile([], 0.5) is None


def test_quantile_from_buckets_is_close_to_the_true_quantile():
    rng = random.Random(7)
    values = [rng.uniform(0.0, 2.5) for _ in range(20000)]
    bounds = [float(b) for b in TTFT_BOUNDS]
    buckets = [(b, float(sum(v <= b for v in values))) for b in bounds] + [(INF, float(len(values)))]
    ordered = sorted(values)
    for q in (0.5, 0.95, 0.99):
        truth = ordered[int(q * len(ordered)) - 1]
        assert quantile(buckets, q) == pytest.approx(truth, rel=0.03)


def test_histogram_delta_subtracts_per_bucket():
    before = {"buckets": [(0.1, 5.0), (0.2, 8.0), (INF, 9.0)], "sum": 1.0, "count": 9.0}
    after = {"buckets": [(0.1, 6.0), (0.2, 12.0), (INF, 14.0)], "sum": 2.0, "count": 14.0}
    assert histogram_delta(after, before) == [(0.1, 1.0), (0.2, 4.0), (INF, 5.0)]


def test_quantiles_come_from_this_interval_only():
    # 1000 fast requests long ago, then 10 slow ones in this interval: p50 must be slow.
    old = parse_metrics(
        vllm_text(ttft=[0, 0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000]), ts=10.0
    )
    new = parse_metrics(
        vllm_text(ttft=[0, 0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1005, 1010, 1010, 1010]), ts=12.0
    )
    window, restarted = pod_window(new, old)
    assert not restarted
    values = metrics(window)
    assert 0.25 < values["ttft_p50"] <= 0.5
    assert 0.5 < values["ttft_p95"] <= 1.0


def test_prefix_hit_rate_is_delta_hits_over_delta_queries_in_tokens():
    before = parse_metrics(vllm_text(queries=1000, hits=600), ts=10.0)
    after = parse_metrics(vllm_text(queries=1400, hits=900), ts=12.0)
    values = metrics(pod_window(after, before)[0])
    assert values["hit_rate"] == pytest.approx(300 / 400)


def test_hit_rate_without_new_queries_is_none():
    sample = parse_metrics(vllm_text(queries=1000, hits=600), ts=10.0)
    later = parse_metrics(vllm_text(queries=1000, hits=600), ts=12.0)
    assert metrics(pod_window(later, sample)[0])["hit_rate"] is None


def test_external_hit_rate_rates_and_request_outcomes():
    before = parse_metrics(
        vllm_text(ext_queries=400, ext_hits=100, prompt=5000, generated=2000, ok=40, aborted=2), ts=10.0
    )
    after = parse_metrics(
        vllm_text(ext_queries=600, ext_hits=250, prompt=7000, generated=2500, ok=47, aborted=3), ts=12.0
    )
    values = metrics(pod_window(after, before)[0])
    assert values["external_hit_rate"] == pytest.approx(150 / 200)
    assert values["prompt_tps"] == pytest.approx(1000)
    assert values["gen_tps"] == pytest.approx(250)
    assert values["requests_ps"] == pytest.approx(4.0)
    assert values["success_rate"] == pytest.approx(7 / 8)
    assert values["error_rate"] == pytest.approx(1 / 8)
    assert values["running"] == 3 and values["waiting"] == 1 and values["kv_usage"] == pytest.approx(0.25)


def test_first_sample_has_gauges_but_no_rates():
    values = metrics(pod_window(parse_metrics(vllm_text(), ts=10.0), None)[0])
    assert values["waiting"] == 1
    assert values["prompt_tps"] is None and values["hit_rate"] is None and values["ttft_p95"] is None


def test_counter_reset_uses_new_values_as_the_increment_never_negative():
    before = parse_metrics(
        vllm_text(queries=100000, hits=90000, prompt=900000, generated=50000, ok=5000), ts=10.0
    )
    # the pod restarted: every counter starts again from small values
    after = parse_metrics(
        vllm_text(
            queries=200,
            hits=50,
            prompt=400,
            generated=100,
            ok=4,
            aborted=0,
            ttft=[0, 0, 0, 0, 1, 2, 3, 4, 4, 4, 4, 4, 4],
        ),
        ts=12.0,
    )
    window, restarted = pod_window(after, before)
    assert restarted
    values = metrics(window)
    assert values["hit_rate"] == pytest.approx(50 / 200)
    assert values["prompt_tps"] == pytest.approx(200)
    assert values["gen_tps"] == pytest.approx(50)
    assert values["ttft_p50"] is not None and values["ttft_p50"] > 0
    for name, value in values.items():
        assert value is None or value >= 0, name


def test_role_quantiles_come_from_merged_buckets_not_averaged_quantiles():
    fast_before = parse_metrics(vllm_text(ttft=[0] * 13), ts=0.0)
    fast_after = parse_metrics(vllm_text(ttft=[0, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90, 90]), ts=2.0)
    slow_before = parse_metrics(vllm_text(ttft=[0] * 13), ts=0.0)
    slow_after = parse_metrics(vllm_text(ttft=[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 10, 10]), ts=2.0)
    role = merge([pod_window(fast_after, fast_before)[0], pod_window(slow_after, slow_before)[0]])
    values = metrics(role)
    assert values["ttft_p50"] < 0.005  # 90 of 100 requests were fast
    assert values["ttft_p99"] > 0.5  # the slow pod's tail shows up
    assert role.pods == 2


def test_merging_histograms_with_different_bounds():
    merged = merge_buckets([(0.1, 1.0), (INF, 2.0)], [(0.2, 3.0), (INF, 4.0)])
    assert merged == [(0.1, 1.0), (0.2, 4.0), (INF, 6.0)]


def test_sglang_and_mindie_hit_rate_gauges_are_used_as_is():
    sg = metrics(
        pod_window(parse_metrics(sglang_text(), ts=2.0), parse_metrics(sglang_text(prompt=1000), ts=0.0))[0]
    )
    assert sg["hit_rate"] == pytest.approx(0.42)
    assert sg["prompt_tps"] == pytest.approx(1000)
    assert sg["kv_usage"] == pytest.approx(0.61)
    mi = metrics(
        pod_window(
            parse_metrics(mindie_text(ok=30, failed=2), ts=2.0),
            parse_metrics(mindie_text(ok=20, failed=1), ts=0.0),
        )[0]
    )
    assert mi["hit_rate"] == pytest.approx(0.35)
    assert mi["success_rate"] == pytest.approx(10 / 11, rel=1e-4)  # values keep 5 significant digits
    assert mi["waiting"] == 6


def test_topology_takes_hit_rate_from_prefill_and_latency_from_decode():
    p = pod_window(
        parse_metrics(vllm_text(queries=2000, hits=1500), ts=2.0),
        parse_metrics(vllm_text(queries=1000, hits=600), ts=0.0),
    )[0]
    slow = [0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 10, 10, 10]
    d = pod_window(
        parse_metrics(vllm_text(queries=1000, hits=0, ttft=slow), ts=2.0),
        parse_metrics(vllm_text(queries=0, hits=0, ttft=[0] * 13), ts=0.0),
    )[0]
    totals = topology_metrics({"prefill": p, "decode": d})
    assert totals["hit_rate"] == pytest.approx(900 / 1000)
    assert 0.25 < totals["ttft_p50"] <= 0.5
    assert totals["waiting"] == 2  # queues add up over every pod


def test_the_30_second_hit_rate_is_stable_where_the_interval_value_swings():
    from telemetry.derive import Window, hit_rate_window

    def prefill(hits: float, queries: float) -> dict[str, Window]:
        return {
            "prefill": Window(
                deltas={"prefix_hits": hits, "prefix_queries": queries}, has_deltas=True, pods=1
            )
        }

    kept: list[list[float]] = []
    shown = []
    # Alternating intervals of 33 % and 95 % (few requests finish per interval).
    for k in range(20):
        hits, queries = (33.0, 100.0) if k % 2 else (95.0, 100.0)
        kept, value = hit_rate_window(kept, prefill(hits, queries), ts=1000.0 + 2 * k)
        shown.append(value)
    assert all(t - 1000.0 > 38 - 30 for t, *_ in kept) and len(kept) == 15  # 30 s of 2-s intervals
    assert 0.60 <= min(shown[-5:]) <= max(shown[-5:]) <= 0.67  # not 33 % then 95 %
    # A real change still shows within the window.
    for k in range(20, 36):
        kept, value = hit_rate_window(kept, prefill(0.0, 100.0), ts=1000.0 + 2 * k)
    assert value == 0.0


def test_the_30_second_hit_rate_reads_a_gauge_engine_and_is_none_without_lookups():
    from telemetry.derive import Window, hit_rate_window

    gauge = {"prefill": Window(gauges={"hit_rate": [0.5, 0.7]}, pods=2)}
    kept, value = hit_rate_window([], gauge, ts=10.0)
    assert value == pytest.approx(0.6)
    kept, value = hit_rate_window([], {"decode": Window(pods=1)}, ts=10.0)
    assert (kept, value) == ([], None)


def test_ttft_and_tbt_means_are_this_intervals_sum_over_its_count():
    from telemetry.tests.exposition import ITL_BOUNDS, MODEL, histogram

    def text(ttft_count: int, ttft_sum: float, itl_count: int, itl_sum: float) -> str:
        ttft = histogram("vllm:time_to_first_token_seconds", TTFT_BOUNDS, [ttft_count] * 13, ttft_sum, MODEL)
        itl = histogram("vllm:inter_token_latency_seconds", ITL_BOUNDS, [itl_count] * 13, itl_sum, MODEL)
        return ttft + "\n" + itl + "\n"

    before = parse_metrics(text(100, 50.0, 1000, 20.0), ts=10.0)
    after = parse_metrics(text(110, 53.0, 1400, 32.0), ts=12.0)
    values = metrics(pod_window(after, before)[0])
    assert values["ttft_mean"] == pytest.approx(3.0 / 10)  # this interval's 10 requests, not the 110
    assert values["tbt_mean"] == pytest.approx(12.0 / 400)
    quiet = metrics(pod_window(parse_metrics(text(110, 53.0, 1400, 32.0), ts=14.0), after)[0])
    assert quiet["ttft_mean"] is None and quiet["tbt_mean"] is None  # nothing observed: no value, not 0
    merged = metrics(merge([pod_window(after, before)[0], pod_window(after, before)[0]]))
    assert merged["tbt_mean"] == pytest.approx(12.0 / 400)  # pods merge by sums and counts
