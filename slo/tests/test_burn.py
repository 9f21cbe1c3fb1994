"""The burn-rate math, the alert rules per window, histogram SLIs and the notification bodies (pure)."""

from __future__ import annotations

import math

import pytest

from slo import burn, payloads


def test_rules_scale_the_workbook_thresholds_with_the_window() -> None:
    thirty = burn.rules_for(30)
    assert [(r.severity, r.long_s, r.short_s) for r in thirty] == [
        ("page", 3600, 300), ("page", 21600, 1800), ("ticket", 259200, 21600),
    ]  # fmt: skip
    assert [round(r.burn, 3) for r in thirty] == [14.4, 6.0, 1.0]
    assert [round(r.burn, 3) for r in burn.rules_for(28)] == [13.44, 5.6, 0.933]
    assert [r.name for r in thirty] == ["page 1 h/5 m", "page 6 h/30 m", "ticket 3 d/6 h"]
    with pytest.raises(ValueError):
        burn.rules_for(0)


def test_burn_rate_and_budget() -> None:
    assert burn.burn_rate(990, 1000, 0.99) == pytest.approx(1.0)
    assert burn.burn_rate(856, 1000, 0.99) == pytest.approx(14.4)
    assert burn.burn_rate(0, 0, 0.99) is None
    assert burn.budget_remaining(1000, 1000, 0.99) == 1.0
    assert burn.budget_remaining(995, 1000, 0.99) == pytest.approx(0.5)
    assert burn.budget_remaining(980, 1000, 0.99) == pytest.approx(-1.0)
    assert burn.budget_remaining(0, 0, 0.99) is None
    with pytest.raises(ValueError):
        burn.error_budget(1.0)


def test_an_alert_needs_both_windows_burning() -> None:
    rules = burn.rules_for(30)
    page = rules[0]
    hot = {3600.0: 15.0, 300.0: 20.0}
    assert burn.rule_holds(page, hot)
    assert not burn.rule_holds(page, {3600.0: 15.0, 300.0: 2.0})  # already recovering: short window cold
    assert not burn.rule_holds(page, {3600.0: 3.0, 300.0: 50.0})  # a short spike: long window cold
    assert not burn.rule_holds(page, {3600.0: 15.0, 300.0: None})  # no events lately
    held = burn.severity_holds(rules, {**hot, 21600.0: 7.0, 1800.0: 7.0, 259200.0: 0.5})
    assert held["page"] == page and held["ticket"] is None
    assert burn.decide(firing=False, holds=True) == "fire"
    assert burn.decide(firing=True, holds=True) is None
    assert burn.decide(firing=True, holds=False) == "resolve"
    assert burn.decide(firing=False, holds=False) is None


def test_budget_colours_and_backoff() -> None:
    assert [burn.budget_colour(v) for v in (None, 0.9, 0.26, 0.25, 0.01, 0.0, -2.0)] == [
        "unknown", "ok", "ok", "warn", "warn", "bad", "bad",
    ]  # fmt: skip
    assert [burn.backoff_seconds(n) for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 320, 600]
    assert burn.backoff_seconds(2, base=0.5) == 1.0


def test_good_events_from_histogram_buckets() -> None:
    buckets = [(0.1, 10.0), (0.5, 60.0), (1.0, 90.0), (math.inf, 100.0)]
    assert burn.good_at_most(buckets, 0.5) == (60.0, 100.0)  # on a bound: exact
    assert burn.good_at_most(buckets, 0.75) == pytest.approx((75.0, 100.0))  # between: linear share
    assert burn.good_at_most(buckets, 5.0) == (90.0, 100.0)  # past the last bound: the +Inf bucket is bad
    assert burn.good_at_most(buckets, 0.05) == pytest.approx((5.0, 100.0))
    assert burn.good_at_most([], 0.5) == (0.0, 0.0)


INFO = payloads.AlertInfo(
    alert_id=7, topology_id=3, topology="qwen", slo_id=5, sli="ttft",
    slo="99 % of requests have TTFT ≤ 800 ms over 28 days", severity="page", status="firing",
    rule="page 1 h/5 m", burn_threshold=13.44, long_burn=20.5, short_burn=31.0, budget_remaining=0.42,
    started="2026-12-03T10:00:00Z", ended=None, url="https://tandem.example/topologies/3/#slo",
)  # fmt: skip


def test_alertmanager_body_is_a_version_4_webhook() -> None:
    body = payloads.render("alertmanager", INFO, receiver="oncall")
    assert body["version"] == "4" and body["status"] == "firing" and body["receiver"] == "oncall"
    assert body["groupKey"] == '{}:{alertname="SLOErrorBudgetBurn", topology="qwen"}'
    (alert,) = body["alerts"]
    assert alert["labels"] == {
        "alertname": "SLOErrorBudgetBurn", "topology": "qwen", "sli": "ttft", "severity": "page",
        "slo_id": "5",
    }  # fmt: skip
    assert alert["startsAt"] == "2026-12-03T10:00:00Z" and alert["endsAt"] == payloads.ZERO_TIME
    assert alert["generatorURL"] == INFO["url"] and body["externalURL"] == "https://tandem.example"
    resolved = payloads.render(
        "alertmanager", {**INFO, "status": "resolved", "ended": "2026-12-03T11:00:00Z"}, receiver="x"
    )
    assert resolved["status"] == "resolved" and resolved["alerts"][0]["endsAt"] == "2026-12-03T11:00:00Z"
    assert resolved["alerts"][0]["fingerprint"] == alert["fingerprint"]


def test_slack_and_generic_bodies() -> None:
    slack = payloads.render("slack", INFO, receiver="x")
    assert slack["text"].startswith("Page: qwen: TTFT SLO burning its error budget at 20.5×")
    assert slack["blocks"][0]["type"] == "section" and "42.0 %" in str(slack["blocks"][1])
    generic = payloads.render("json", INFO, receiver="x")
    assert generic["kind"] == "tandem.slo_alert" and generic["alert"]["alert_id"] == 7


def test_urls_are_shown_masked() -> None:
    assert (
        payloads.mask_url("https://hooks.slack.com/services/T0A1/B2C3/q7Rzabcd")
        == "https://hooks.slack.com/…abcd"
    )
    assert "pw" not in payloads.mask_url("https://user:pw@example.com/hook/123456")
    assert payloads.mask_url("http://127.0.0.1:9000") == "http://127.0.0.1:9000"
