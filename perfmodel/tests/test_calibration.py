"""The fits on synthetic intervals drawn from known parameters (no database)."""

from __future__ import annotations

import random

import pytest

from perfmodel.calibration import Interval, calibrate, least_squares, mape_r2

RATE, STEP, PER_SEQ, OVERHEAD = 0.2, 20.0, 1.5, 0.5


def synthetic(*, noise: float, seed: int = 7, prefill: int = 12, decode: int = 12, batches=(2, 8, 16)):
    """Intervals of a P/D topology (2 pods per role) generated from RATE/STEP/PER_SEQ with ±noise."""
    rng = random.Random(seed)

    def jitter(value: float) -> float:
        return value * (1 + noise * (2 * rng.random() - 1))

    out = []
    for i in range(prefill):
        prompt, hit, rps = 1000.0 + 200 * (i % 4), 0.3, 2.0 + i % 3
        service = OVERHEAD + RATE * prompt * (1 - hit)
        rho = rps / 2 * service / 1000
        ttft = service + rho * service / (2 * (1 - rho))
        out.append(
            Interval(
                ts=float(i), role="prefill", pods=2, requests_ps=rps, prompt_tps=prompt * rps,
                hit_rate=hit, running=1.0, waiting=0.0, ttft_p50=jitter(ttft) / 1000,
            )
        )  # fmt: skip
    for i in range(decode):
        batch = batches[i % len(batches)]
        step = OVERHEAD + STEP + PER_SEQ * batch
        out.append(
            Interval(
                ts=float(i), role="decode", pods=2, running=2.0 * batch,
                gen_tps=jitter(2 * batch * 1000 / step), tbt_p50=jitter(step) / 1000, xfer_ms=jitter(4.0),
            )
        )  # fmt: skip
    return out


def test_the_fits_recover_known_parameters_within_10_percent_under_5_percent_noise():
    result = calibrate(synthetic(noise=0.05))
    fits = result.fits
    assert result.verdict == "ok", result.reasons
    assert fits["prefill_ms_per_token"].value == pytest.approx(RATE, rel=0.10)
    assert fits["decode_step_ms"].value == pytest.approx(STEP, rel=0.10)
    assert fits["decode_ms_per_seq"].value == pytest.approx(PER_SEQ, rel=0.10)
    assert fits["hit_rate"].value == pytest.approx(0.3)
    assert fits["kv_latency_ms"].value == pytest.approx(4.0, rel=0.10)
    assert fits["prefill_ms_per_token"].intervals == 12 and fits["decode_step_ms"].intervals == 12
    errors = {(e.role, e.metric): e for e in result.errors}
    assert errors["prefill", "ttft"].mape < 0.05 and errors["decode", "tbt"].mape < 0.05
    assert errors["decode", "tbt"].r2 > 0.9
    assert result.perf["decode_ms_per_seq"] == pytest.approx(PER_SEQ, rel=0.10)
    assert set(result.perf) <= {
        "prefill_ms_per_token", "decode_step_ms", "decode_ms_per_seq", "step_overhead_ms", "kv_latency_ms",
    }  # fmt: skip


def test_queueing_is_taken_out_of_the_prefill_rate():
    """At 40 % utilisation TTFT is a third above service time; the M/D/1 correction removes it."""
    busy = [
        Interval(ts=float(i), role="prefill", pods=1, requests_ps=2.0, prompt_tps=2000.0, hit_rate=0.0,
                 waiting=0.0, ttft_p50=(200.0 + 0.4 * 200.0 / 1.2) / 1000)
        for i in range(6)
    ]  # fmt: skip
    fit = calibrate(busy).fits["prefill_ms_per_token"]
    assert fit.value == pytest.approx((200.0 - OVERHEAD) / 1000, rel=0.01)


def test_too_few_intervals_is_not_enough_data_with_what_to_run():
    result = calibrate(synthetic(noise=0.02, prefill=3, decode=3))
    assert result.verdict == "not enough data"
    assert any("only 3 intervals with decode load; need 5" in r for r in result.reasons)
    assert any("concurrency load" in r for r in result.reasons)
    assert result.perf == {}


def test_a_batch_that_never_varies_cannot_separate_base_from_per_sequence():
    result = calibrate(synthetic(noise=0.02, batches=(8,)))
    assert result.verdict == "not enough data"
    assert any("two concurrencies" in r for r in result.reasons)
    assert result.fits["decode_ms_per_seq"].value is None


def test_measurements_the_model_does_not_explain_are_a_poor_fit():
    intervals = synthetic(noise=0.02)
    wild = [
        Interval(**{**vars(iv), "tbt_p50": iv.tbt_p50 * (3 if iv.ts % 2 else 0.3)})
        if iv.role == "decode"
        else iv
        for iv in intervals
    ]
    result = calibrate(wild)
    assert result.verdict == "poor fit"
    assert any("decode TBT" in r for r in result.reasons)
    assert result.perf == {}


def test_least_squares_and_error_measures():
    assert least_squares([(1, 3), (2, 5), (3, 7)]) == pytest.approx((1.0, 2.0))
    assert least_squares([(2, 3), (2, 5)]) is None
    mape, r2 = mape_r2([(10, 10), (22, 20), (27, 30)])
    assert mape == pytest.approx(0.1) and r2 == pytest.approx(1 - (0 + 4 + 9) / 200)


def test_with_tbt_means_the_decode_fit_ignores_a_running_gauge_that_counts_sequences_waiting_for_kv():
    """The running gauge is one reading at the collection, and counts sequences still pulling their KV;
    the TBT histogram's mean over the interval is the step, and tokens/s × step the batch that decoded."""
    rng = random.Random(3)
    decode = []
    for i in range(12):
        batch = (2, 8, 16)[i % 3]
        step = OVERHEAD + STEP + PER_SEQ * batch
        decode.append(
            Interval(
                ts=float(i), role="decode", pods=2, running=2.0 * batch + rng.choice((0, 6, 14)),
                gen_tps=2 * batch * 1000 / step, tbt_p50=0.05, tbt_mean=step / 1000,
            )
        )  # fmt: skip
    prefill = [iv for iv in synthetic(noise=0.0) if iv.role == "prefill"]
    result = calibrate([*prefill, *decode])
    assert result.verdict == "ok", result.reasons
    assert result.fits["decode_step_ms"].value == pytest.approx(STEP, rel=0.01)
    assert result.fits["decode_ms_per_seq"].value == pytest.approx(PER_SEQ, rel=0.01)
    without_means = [Interval(**{**vars(iv), "tbt_mean": None}) for iv in decode]
    biased = calibrate([*prefill, *without_means]).fits["decode_ms_per_seq"].value
    assert biased is None or abs(biased - PER_SEQ) > 0.05 * PER_SEQ  # the gauge alone gets it wrong


def test_the_prefill_fit_prefers_the_exact_ttft_mean_to_the_bucketed_p50():
    service = OVERHEAD + 1000 * RATE  # 1,000 uncached tokens per request, 0.5 requests/s on one pod
    rho = 0.5 * service / 1000
    mean = (service + rho * service / (2 * (1 - rho))) / 1000
    intervals = [
        Interval(ts=float(i), role="prefill", pods=1, requests_ps=0.5, prompt_tps=500.0, hit_rate=0.0,
                 waiting=0.0, ttft_p50=0.25, ttft_mean=mean)  # the p50: the bucket's bound, far off
        for i in range(6)
    ]  # fmt: skip
    assert calibrate(intervals).fits["prefill_ms_per_token"].value == pytest.approx(RATE, rel=0.01)
