from __future__ import annotations

from telemetry.assemble import (
    LinkInputs,
    PodResult,
    PodTarget,
    backoff_after_failure,
    build_snapshot,
    empty_state,
)
from telemetry.health import evaluate_slo, slo_step
from telemetry.links import engine_view
from telemetry.parse import parse_metrics
from telemetry.tests.conftest import probe_result
from telemetry.tests.exposition import mindie_text, vllm_text


def run(states, n=3, alert_open=False):
    track, actions = None, []
    for state in states:
        track, action = slo_step(track, state, alert_open=alert_open, intervals=n)
        if action == "raise":
            alert_open = True
        if action == "resolve":
            alert_open = False
        actions.append(action)
    return actions


def test_alert_raises_only_after_n_violated_intervals_in_a_row():
    assert run(["violated", "violated", "ok", "violated", "violated"]) == [None] * 5
    assert run(["violated", "violated", "violated", "violated"]) == [None, None, "raise", None]


def test_alert_resolves_only_after_n_good_intervals_in_a_row():
    actions = run(["violated"] * 3 + ["ok", "ok", "violated", "ok", "ok", "ok"])
    assert actions == [None, None, "raise", None, None, None, None, None, "resolve"]


def test_intervals_without_data_neither_raise_nor_resolve():
    assert run(["violated", "unknown", "violated", "unknown", "violated"]) == [
        None,
        None,
        None,
        None,
        "raise",
    ]


def test_slo_compares_p95_in_ms_with_targets():
    slo, per = evaluate_slo(ttft_p95_s=0.8, tbt_p95_s=0.03, ttft_ms=500, tbt_ms=50)
    assert slo["state"] == "violated" and per == {"ttft": "violated", "tbt": "ok"}
    assert slo["ttft_p95_ms"] == 800
    slo, _ = evaluate_slo(ttft_p95_s=None, tbt_p95_s=None, ttft_ms=500, tbt_ms=50)
    assert slo["state"] == "unknown"


def test_back_off_doubles_per_consecutive_failure_and_is_capped():
    first = backoff_after_failure(None, now=100.0, interval_s=2.0)
    assert first == {"failures": 1, "retry_at": 100.0}
    second = backoff_after_failure(first, now=100.0, interval_s=2.0)
    third = backoff_after_failure(second, now=100.0, interval_s=2.0)
    assert (second["retry_at"], third["retry_at"]) == (102.0, 104.0)
    many = first
    for _ in range(20):
        many = backoff_after_failure(many, now=100.0, interval_s=2.0)
    assert many["retry_at"] == 130.0


def pod(name, role, ready=True, ip="127.0.0.10"):
    return PodTarget(name=name, role=role, ip=ip, port=8000, ready=ready, phase="Running")


def probes(decode, ok):
    probe = probe_result("prefill-0", decode, ts=102.0, ok=ok, error=None if ok else "no answer within 1.6 s")
    return LinkInputs(view=engine_view("vllm", "nixl"), probes=[probe])


def snapshot(results, state=None, **kw):
    return build_snapshot(
        topology_id=1,
        ts=102.0,
        interval_s=2.0,
        results=results,
        state=state or empty_state(),
        slo_ttft_ms=kw.get("ttft_ms", 500.0),
        slo_tbt_ms=50.0,
        open_alerts=set(),
        alert_intervals=3,
        link_slow_ms=250.0,
        events=[],
        link_inputs=kw.get("links"),
    )


def test_health_explains_a_broken_link_while_both_pods_are_ready():
    raw = parse_metrics(vllm_text(), ts=102.0)
    results = [
        PodResult(target=pod("prefill-0", "prefill"), raw=raw),
        PodResult(target=pod("decode-2", "decode", ip="127.0.0.12"), raw=raw),
    ]
    snap, _, _ = snapshot(results, links=probes("decode-2", ok=False))
    assert all(p["ready"] for p in snap["pods"])
    assert snap["links"][0]["state"] == "down"
    assert snap["health"]["state"] == "down"  # the only link is down: no KV moves
    assert (
        "Tandem's probe from prefill-0 to decode-2 failed: no answer within 1.6 s"
        in snap["health"]["reasons"]
    )
    assert snap["totals"]["links_down"] == 1


def test_health_names_pods_that_are_not_ready_or_not_scraped():
    raw = parse_metrics(vllm_text(), ts=102.0)
    results = [
        PodResult(target=pod("prefill-0", "prefill"), raw=raw),
        PodResult(target=pod("prefill-1", "prefill", ready=False), error=None),
        PodResult(
            target=pod("decode-0", "decode"),
            error="no answer from http://127.0.0.11:8000/metrics within 1.6 s",
        ),
    ]
    snap, state, _ = snapshot(results)
    reasons = " | ".join(snap["health"]["reasons"])
    assert snap["health"]["state"] == "degraded"
    assert "prefill-1 (prefill) is not Ready" in reasons
    assert "decode-0: metrics unavailable — no answer" in reasons
    assert state["backoff"]["decode-0"]["failures"] == 1
    decode = next(p for p in snap["pods"] if p["name"] == "decode-0")
    assert decode["stale"] is True


def test_no_ready_pod_in_a_role_means_down():
    results = [
        PodResult(target=pod("prefill-0", "prefill", ready=False)),
        PodResult(target=pod("decode-0", "decode"), raw=parse_metrics(vllm_text(), ts=102.0)),
    ]
    snap, _, _ = snapshot(results)
    assert snap["health"]["state"] == "down"
    assert snap["health"]["reasons"][0].startswith("no prefill pod is Ready")


def test_no_pods_is_unknown_and_healthy_when_all_is_well():
    snap, _, _ = snapshot([])
    assert snap["health"]["state"] == "unknown"
    raw = parse_metrics(vllm_text(), ts=102.0)
    results = [
        PodResult(target=pod("prefill-0", "prefill"), raw=raw),
        PodResult(target=pod("decode-0", "decode", ip="127.0.0.11"), raw=raw),
    ]
    snap, _, _ = snapshot(results, links=probes("decode-0", ok=True))
    assert snap["health"] == {"state": "healthy", "reasons": []}
    assert set(snap["roles"]) == {"prefill", "decode"}


def test_slo_violation_streak_survives_between_collections_and_raises_once():
    before = parse_metrics(vllm_text(ttft=[0] * 13), ts=100.0)
    state = empty_state()
    actions = []
    ttft = [0] * 13
    for step in range(4):
        ttft = [
            c if i < 10 else c + 10 for i, c in enumerate(ttft)
        ]  # 10 slow (0.5-1 s) requests per interval
        raw = parse_metrics(vllm_text(ttft=ttft), ts=102.0 + 2 * step)
        results = [PodResult(target=pod("decode-0", "decode"), raw=raw)]
        state["pods"].setdefault("decode-0", before)
        snap, state, action = build_snapshot(
            topology_id=1,
            ts=102.0 + 2 * step,
            interval_s=2.0,
            results=results,
            state=state,
            slo_ttft_ms=500.0,
            slo_tbt_ms=None,
            open_alerts={"ttft"} if "raise" in [a.get("ttft") for a in actions] else set(),
            alert_intervals=3,
            link_slow_ms=250.0,
            events=[],
        )
        actions.append(action)
        assert snap["slo"]["state"] == "violated"
    assert [a.get("ttft") for a in actions] == [None, None, "raise", None]


def test_an_engine_that_exposes_nothing_about_links_shows_them_unknown_with_what_it_cannot_see():
    raw = parse_metrics(mindie_text(), ts=102.0)
    results = [
        PodResult(target=pod("prefill-0", "prefill"), raw=raw),
        PodResult(target=pod("decode-0", "decode", ip="127.0.0.11"), raw=raw),
    ]
    links = LinkInputs(view=engine_view("mindie", "llm-datadist"))
    snap, _, _ = snapshot(results, links=links)
    [link] = snap["links"]
    assert (link["prefill"], link["decode"], link["state"]) == ("prefill-0", "decode-0", "unknown")
    assert snap["totals"]["links_unknown"] == 1 and snap["totals"]["links_down"] == 0
    assert any("mindie exports no KV-transfer metrics" in text for text in link["blind"])
    assert snap["health"]["state"] == "healthy"  # nothing seen wrong; the page says what it cannot see
