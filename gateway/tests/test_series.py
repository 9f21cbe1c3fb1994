"""Bucket maths of the gateway charts (pure): step choice, quantiles, rates, shares, gaps, marks."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway import series
from gateway.series import BucketRow


def _row(index: int, cluster: int = 0, fallback: int = 0, none: int = 0, **kwargs: object) -> BucketRow:
    return BucketRow(
        index=index,
        cluster=cluster,
        fallback=fallback,
        none=none,
        verification=int(kwargs.get("verification", 0)),  # type: ignore[call-overload]
        errors=int(kwargs.get("errors", 0)),  # type: ignore[call-overload]
        refused=int(kwargs.get("refused", 0)),  # type: ignore[call-overload]
        ttft=kwargs.get("ttft", (None, None)),  # type: ignore[arg-type]
        latency=kwargs.get("latency", (None, None)),  # type: ignore[arg-type]
    )


def test_auto_step_gives_about_120_round_buckets():
    assert series.auto_step(300) == 5
    assert series.auto_step(900) == 10
    assert series.auto_step(3600) == 30
    assert series.auto_step(6 * 3600) == 300
    assert series.auto_step(24 * 3600) == 900
    assert series.auto_step(7 * 24 * 3600) == 7200
    assert series.auto_step(10**9) == series.STEPS[-1]


def test_percentile_interpolates_like_postgresql_percentile_cont():
    assert series.percentile([], 0.5) is None
    assert series.percentile([7.0], 0.95) == 7.0
    assert series.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    # rank 0.95 * 9 = 8.55 between 9 and 10
    assert abs(series.percentile([float(v) for v in range(1, 11)], 0.95) - 9.55) < 1e-9  # type: ignore[operator]


def test_buckets_turn_counts_into_rates_shares_and_gaps():
    first, step = 1_000_000.0, 10
    rows = [
        _row(0, cluster=8, fallback=2, errors=1, ttft=(20.0, 40.0), latency=(100.0, 180.0)),
        _row(2, cluster=1, none=3, refused=3, ttft=(None, None), latency=(90.0, 90.0)),
    ]
    out = series.build(rows, first=first, end=first + 40, step=step)
    assert out["timestamps"] == [first, first + 10, first + 20, first + 30]
    assert out["series"]["rps.cluster"] == [0.8, 0.0, 0.1, 0.0]
    assert out["series"]["rps.fallback"] == [0.2, 0.0, 0.0, 0.0]
    assert out["series"]["rps.none"] == [0.0, 0.0, 0.3, 0.0]
    assert out["series"]["share.errors"] == [0.1, None, 0.0, None]
    assert out["series"]["share.refused"] == [0.0, None, 0.75, None]
    assert out["series"]["ttft.p95"] == [40.0, None, None, None]
    assert out["series"]["latency.p50"] == [100.0, None, 90.0, None]
    assert out["totals"] == {
        "requests": 14.0,
        "cluster": 9.0,
        "fallback": 2.0,
        "verification": 0.0,
        "refused": 3.0,
        "errors": 1.0,
        "error_share": 1 / 14,
    }


def test_the_last_bucket_divides_by_the_seconds_elapsed_so_far():
    first = 600.0
    out = series.build([_row(1, cluster=12)], first=first, end=first + 60 + 4, step=60)
    assert len(out["timestamps"]) == 2
    assert out["series"]["rps.cluster"] == [0.0, 3.0]  # 12 requests in the 4 s elapsed


def test_rows_outside_the_window_are_ignored():
    out = series.build([_row(-1, cluster=5), _row(9, cluster=5)], first=0.0, end=20.0, step=10)
    assert out["totals"]["requests"] == 0.0 and out["totals"]["error_share"] is None


def test_a_mark_where_each_run_of_fallback_traffic_begins():
    marks = series.fallback_marks([0.0, 0.5, 0.2, 0.0, None, 1.0], first=100.0, step=5)
    assert [m["ts"] for m in marks] == [105.0, 125.0]
    assert {m["kind"] for m in marks} == {"fallback"}


def test_breaker_marks_say_the_state_and_the_reason():
    mark = series.breaker_marker(5.0, "open", "cannot connect to 10.0.0.1:8080")
    assert mark == {
        "ts": 5.0,
        "kind": "breaker_open",
        "text": "circuit opened: cannot connect to 10.0.0.1:8080",
    }


def test_python_aggregation_counts_and_quantiles_per_bucket():
    def at(second: float) -> datetime:
        return datetime.fromtimestamp(1_000_000 + second, tz=UTC)

    records = [
        (at(1), "cluster", 200, True, False, 10.0, 100.0),
        (at(2), "cluster", 200, True, False, 30.0, 300.0),
        (at(3), "fallback", 200, True, False, None, 200.0),
        (at(4), "cluster", 502, False, False, None, 5000.0),
        (at(12), "none", 401, False, False, None, 0.5),
    ]
    rows = series.aggregate(records, first=1_000_000.0, step=10)
    assert rows == [
        BucketRow(0, 3, 1, 0, 0, 1, 0, (20.0, 29.0), (200.0, 290.0)),
        BucketRow(1, 0, 0, 1, 0, 0, 1, (None, None), (None, None)),
    ]


def test_ttft_is_over_streamed_answers_only_and_latency_over_all():
    """A whole (non-streamed) answer has no first token: its time, even if a record carries one, is
    not a TTFT; its latency still counts."""
    at = datetime.fromtimestamp(1_000_000, tz=UTC)
    records = [
        (at, "cluster", 200, True, False, 10.0, 100.0),
        (at, "cluster", 200, False, False, 900.0, 900.0),  # an older record: ttft = whole latency
        (at, "cluster", 200, False, False, None, 500.0),
    ]
    (row,) = series.aggregate(records, first=1_000_000.0, step=10)
    assert row.ttft == (10.0, 10.0)
    assert row.latency == (500.0, 860.0)
    whole_only = series.aggregate([records[2]], first=1_000_000.0, step=10)
    out = series.build(whole_only, first=1_000_000.0, end=1_000_020.0, step=10)
    assert out["series"]["ttft.p50"] == [None, None] and out["series"]["latency.p50"] == [500.0, None]


def test_verification_requests_are_their_own_rate_and_counted_in_the_totals():
    at = datetime.fromtimestamp(1_000_000, tz=UTC)
    records = [
        (at, "cluster", 200, True, True, 10.0, 100.0),
        (at, "fallback", 200, True, True, 20.0, 200.0),
        (at, "cluster", 502, False, True, None, 50.0),
        (at, "cluster", 200, True, False, 30.0, 300.0),
    ]
    rows = series.aggregate(records, first=1_000_000.0, step=10)
    out = series.build(rows, first=1_000_000.0, end=1_000_020.0, step=10)
    assert out["series"]["rps.verification"] == [0.3, 0.0]
    assert out["series"]["rps.cluster"] == [0.1, 0.0] and out["series"]["rps.fallback"] == [0.0, 0.0]
    assert out["series"]["share.errors"] == [0.25, None]  # the probe's 502 is a failed request too
    assert out["totals"]["requests"] == 4.0 and out["totals"]["verification"] == 3.0
    assert out["events"] == []  # a probe forced onto the fallback is not the gateway falling back
