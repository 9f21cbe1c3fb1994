"""How keys read on the pages: expiry countdowns, meters, hourly series and the sparkline (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from audit.templatetags.audit_format import audit_value
from keys.display import Meter, expiry, hour_starts, hourly_series, parse_percentages, sparkline_points

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def test_expiry_counts_down_and_warns_in_the_last_three_days():
    assert expiry(NOW + timedelta(days=29, hours=5), NOW).text == "expires in 29 days"
    assert expiry(NOW + timedelta(days=29, hours=5), NOW).level == "ok"
    assert expiry(NOW + timedelta(days=1, hours=3), NOW).text == "expires in 1 day 3 h"
    assert expiry(NOW + timedelta(hours=5, minutes=10), NOW).level == "warn"
    assert expiry(NOW + timedelta(seconds=20), NOW).text == "expires in 1 min"
    # A new 7-day key, read seconds later, says 7 days (nearest day), not 6.
    assert expiry(NOW + timedelta(days=7) - timedelta(seconds=5), NOW).text == "expires in 7 days"
    assert expiry(NOW + timedelta(days=6, hours=13), NOW).text == "expires in 7 days"
    assert expiry(NOW + timedelta(days=6, hours=11), NOW).text == "expires in 6 days"
    past = expiry(NOW - timedelta(days=3), NOW)
    assert past.text == "expired 3 days ago" and past.level == "bad"


def test_meter_levels_follow_the_default_alert_thresholds():
    assert Meter("requests today", 10, 100).level == "ok"
    assert Meter("requests today", 80, 100).level == "warn"
    assert Meter("requests today", 100, 100).percent == 100
    assert Meter("requests today", 140, 100).level == "bad"
    assert Meter("requests today", 0, 0).level == "bad"  # a zero quota refuses everything
    assert Meter("requests today", 5, None).level == "ok"


def test_hourly_series_places_rows_in_their_hour_and_fills_gaps():
    rows = [(datetime(2026, 12, 1, 9, tzinfo=UTC), 4), (datetime(2026, 12, 1, 6, tzinfo=UTC), 2)]
    rows.append((datetime(2026, 11, 1, 6, tzinfo=UTC), 99))  # outside the window
    assert hourly_series(rows, end=NOW, hours=4) == [2, 0, 0, 4]
    stamps = hour_starts(end=NOW, hours=4)
    assert stamps[-1] == int(datetime(2026, 12, 1, 9, tzinfo=UTC).timestamp())
    assert stamps[0] == int(datetime(2026, 12, 1, 6, tzinfo=UTC).timestamp())


def test_sparkline_spans_the_box_and_stays_flat_without_traffic():
    points = sparkline_points([0, 5, 10], width=96, height=24, pad=2)
    assert points == "2.0,22.0 48.0,12.0 94.0,2.0"
    assert sparkline_points([0, 0]) == "2.0,22.0 94.0,22.0"


def test_thresholds_parse_from_what_people_type():
    assert parse_percentages("80, 95%") == [80, 95]
    assert parse_percentages("") == []
    assert parse_percentages("80, lots") is None


def test_audit_details_read_plainly():
    assert audit_value(["deploy", "topologies:read"]) == "deploy, topologies:read"
    assert audit_value({"requests_per_minute": [600, 30]}, "changed") == "requests per minute: 600 → 30"
    assert (
        audit_value({"allowed_cidrs": [[], ["10.0.0.0/8"]]}, "changed") == "allowed cidrs: none → 10.0.0.0/8"
    )
    assert audit_value("2026-12-31T09:21:31.220374+00:00") == "2026-12-31 09:21:31 UTC"
    assert audit_value(None) == "—"


def test_the_usage_chart_fits_a_young_key_and_keeps_the_week_for_an_old_one():
    from keys.display import fitted_hours

    assert fitted_hours(None, end=NOW, window=168, minimum=6) == 168
    assert fitted_hours(NOW - timedelta(minutes=20), end=NOW, window=168, minimum=6) == 6
    assert fitted_hours(NOW - timedelta(hours=30), end=NOW, window=168, minimum=6) == 31
    assert fitted_hours(NOW - timedelta(days=9), end=NOW, window=168, minimum=6) == 168
