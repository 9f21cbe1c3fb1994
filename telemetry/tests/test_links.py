"""Link state per engine and connector, from probes, connector metrics and log lines (pure)."""

from __future__ import annotations

import pytest

from telemetry.derive import Window, pod_window, quantile
from telemetry.links import PairInput, engine_view, link_state, pair_link, pairs_of, probe_says_link_failed
from telemetry.logscan import fresh_lines, scan
from telemetry.parse import parse_metrics
from telemetry.tests.conftest import probe_result
from telemetry.tests.exposition import vllm_text

P, D = "prefill-0", "decode-0"
PAIR = PairInput(prefill=P, decode=D, prefill_ip="127.0.0.10", decode_ip="127.0.0.11")
NOW = 1000.0


def link(view, *, window=None, probe=None, lines=(), pod=D, links_of_decode=1, clusters=None, **kw):
    findings = scan(pod, list(lines), clusters if clusters is not None else {})
    return pair_link(
        pair=kw.get("pair", PAIR),
        view=view,
        window=window,
        probe=probe,
        findings=findings,
        links_of_decode=links_of_decode,
        now=NOW,
        interval_s=2.0,
        metrics_ts=NOW,
        slow_ms=250.0,
    )


def nixl_window(*, transfers=0, failed=0, slow=False, itl_slow=False):
    """A decode pod's window in which its NIXL connector moved ``transfers`` KV caches (5-10 ms each,
    or 0.5-1 s when ``slow``) and counted ``failed`` failures; its ITL lies elsewhere (0.75-1 s when
    ``itl_slow``)."""
    zero = [0] * 13
    first = 10 if slow else 2  # index of the bucket the transfers fall in (TTFT_BOUNDS of the exposition)
    xfer = [0] * first + [transfers] * (13 - first)
    itl = [0] * 11 + [50] * 2 if itl_slow else [50] * 13
    before = parse_metrics(vllm_text(xfer=zero, itl=zero, failed_transfers=0), ts=NOW - 2)
    after = parse_metrics(vllm_text(xfer=xfer, itl=itl, failed_transfers=failed), ts=NOW)
    return pod_window(after, before)[0]


NIXL = engine_view("vllm", "nixl")
MOONCAKE = engine_view("vllm-ascend", "mooncake")
DATADIST = engine_view("vllm-ascend", "llm-datadist")
SGLANG = engine_view("sglang", "mooncake")
MINDIE = engine_view("mindie", "llm-datadist")


@pytest.mark.parametrize(
    ("probe_failed", "pair_failures", "pod_failures", "p95", "seen", "expected"),
    [
        (False, 0, 0, 20.0, True, "up"),
        (False, 0, 0, None, False, "unknown"),
        (True, 0, 0, None, True, "down"),
        (False, 1, 0, None, True, "down"),
        (False, 0, 2, 20.0, True, "degraded"),
        (False, 0, 0, 900.0, True, "degraded"),
    ],
)
def test_link_state_rules(probe_failed, pair_failures, pod_failures, p95, seen, expected):
    state = link_state(
        probe_failed=probe_failed, pair_failures=pair_failures, pod_failures=pod_failures, p95_ms=p95,
        slow_ms=250, seen=seen,
    )  # fmt: skip
    assert state == expected


def test_nixl_link_is_up_from_the_probe_and_shows_the_connectors_own_transfer_time_not_itl():
    window = nixl_window(transfers=8, itl_slow=True)
    sample = link(NIXL, window=window, probe=probe_result(P, D, ts=NOW - 0.5))
    assert sample["state"] == "up"
    assert {s["kind"] for s in sample["sources"]} == {"probe", "metrics"}
    assert sample["observed_at"] == NOW  # the freshest source: this interval's scrape
    assert sample["transfers"] == 8 and sample["probe_ms"] == 12.0
    # the label's series is vllm:nixl_xfer_time_seconds (all in the 5-10 ms bucket), not the decode TBT
    assert 5.0 < sample["xfer_p95_ms"] <= 10.0
    assert 750 < 1000 * quantile(window.hists["itl"], 0.95) <= 1000
    assert sample["shared"] is False and sample["blind"] == list(NIXL.blind)


def test_nixl_failure_line_naming_the_probes_request_takes_exactly_that_link_down():
    probe = probe_result(P, D, ts=NOW - 2.5, request_id="tandem-probe-7")
    line = (
        "ERROR 12-01 09:20:01 [nixl_connector.py:1497] NIXL transfer failed for request "
        "cmpl-tandem-probe-7-0 with state ERR. Marking blocks as invalid."
    )
    sample = link(NIXL, window=nixl_window(transfers=0, failed=1), probe=probe, lines=[line])
    assert sample["state"] == "down"
    assert "the probe's KV transfer from prefill-0 to decode-0 failed" in sample["reason"]
    assert "NIXL transfer failed for request cmpl-tandem-probe-7-0" in sample["reason"]
    assert any(s["kind"] == "log" for s in sample["sources"])
    other = PairInput(prefill="prefill-1", decode=D, prefill_ip="127.0.0.13", decode_ip="127.0.0.11")
    sibling_probe = probe_result("prefill-1", D, ts=NOW)
    window = nixl_window(failed=1)
    sibling = link(NIXL, window=window, probe=sibling_probe, lines=[line], pair=other, links_of_decode=2)
    assert sibling["state"] == "degraded"  # the pod's failure counter, shared: never taken as this link's
    assert "shared by its 2 links" in sibling["reason"] and sibling["shared"] is True


def test_connector_failures_no_line_ties_to_a_pair_degrade_every_link_of_the_decode_pod():
    sample = link(
        NIXL, window=nixl_window(transfers=5, failed=2), probe=probe_result(P, D, ts=NOW), links_of_decode=2
    )
    assert sample["state"] == "degraded" and sample["failed"] == 2
    assert sample["reason"].startswith(
        "decode-0 counted 2 failed KV transfers in the last 2 s in its connector"
    )


def test_a_decode_pod_with_one_link_whose_transfers_all_fail_has_that_link_down():
    """No peer label, but one peer: with nothing getting through (no transfer, no probe — the
    Prometheus source probes nothing), the connector's failures are this link's."""
    sample = link(NIXL, window=nixl_window(transfers=0, failed=3))
    assert sample["state"] == "down" and sample["failed"] == 3
    assert "prefill-0 is its only prefill peer" in sample["reason"]
    # Some transfers got through: failing in part, degraded.
    assert link(NIXL, window=nixl_window(transfers=5, failed=2))["state"] == "degraded"
    # Several links: which one failed is unknown, so every one is degraded.
    assert link(NIXL, window=nixl_window(transfers=0, failed=3), links_of_decode=2)["state"] == "degraded"


def test_slow_transfers_degrade_the_link():
    sample = link(NIXL, window=nixl_window(transfers=4, slow=True), probe=probe_result(P, D, ts=NOW))
    assert sample["state"] == "degraded" and sample["xfer_p95_ms"] > 250
    assert "slow: p95" in sample["reason"]


def test_mooncake_sender_line_on_the_prefill_pod_names_the_probe_request():
    probe = probe_result(P, D, ts=NOW - 2.0, request_id="tandem-probe-9")
    line = (
        "ERROR 12-01 09:20:01 [mooncake_connector.py:412] Failed to transfer KV cache for request "
        "cmpl-tandem-probe-9-0: pull_cache from prefill-0 timed out after 1000 ms"
    )
    sample = link(MOONCAKE, probe=probe, lines=[line], pod=P)
    assert sample["state"] == "down" and "prefill-0 logged" in sample["reason"]
    client = line.replace("cmpl-tandem-probe-9-0", "cmpl-abc-0")  # a client request: pairing unknown
    assert link(MOONCAKE, probe=probe_result(P, D, ts=NOW), lines=[client], pod=P)["state"] == "degraded"


def test_llm_datadist_timeout_is_tied_to_the_prefill_by_its_cluster_id_and_names_the_status():
    clusters: dict[str, str] = {}
    built = (
        "INFO 12-01 09:19:00 [llmdatadist_c_mgr_connector.py:521] Successfully build link with cluster id 42 "
    )
    built += "with cluster name pd_comm_127.0.0.10_127.0.0.11 !"
    scan(D, [built], clusters)  # an earlier interval's read
    lines = [
        "INFO 12-01 09:20:00 [llmdatadist_c_mgr_connector.py:521] remote cluster id is: 42",
        "INFO 12-01 09:20:00 [llmdatadist_c_mgr_connector.py:521] Try pull blocks from remote server",
        "ERROR 12-01 09:20:01 [llmdatadist_c_mgr_connector.py:521] LLMDataDistCMgrConnectorWorker: "
        "Timeout during pull_blocks, you can try to increase the sync_kv_timeout config or checking "
        "your connect status",
    ]
    sample = link(DATADIST, probe=probe_result(P, D, ts=NOW), lines=lines, clusters=clusters)
    assert sample["state"] == "down" and sample["status_code"] is None  # the connector prints no code
    assert sample["xfer_p95_ms"] is None and sample["transfers"] == 0
    assert "LLM-DataDist exports no transfer metrics" in sample["blind"][0]
    unknown_peer = link(DATADIST, probe=probe_result(P, D, ts=NOW), lines=lines, clusters={})
    assert unknown_peer["state"] == "degraded"  # the pod's failure, not attributable without the link line


def test_the_older_llm_datadist_connector_logs_its_status_code_and_tandem_shows_it():
    line = "INFO 12-01 09:20:00 [llmdatadist_connector.py:310] local_rank 0 link, ret=LLM_LINK_FAILED"
    [finding] = scan(D, [line], {})
    assert (finding["kind"], finding["code"]) == ("link_failed", "LLM_LINK_FAILED")
    assert scan(D, [line.replace("LLM_LINK_FAILED", "LLM_SUCCESS")], {}) == []


def test_sglang_is_not_probed_and_a_lost_connection_names_the_prefill_by_address():
    assert SGLANG.probed is False
    line = (
        "[2026-12-01 09:20:01 DP0 TP0] Losing connection with prefill instance "
        "(bootstrap_addr: 127.0.0.10:8998), affected 3 requests"
    )
    down = link(SGLANG, lines=[line])
    assert down["state"] == "down" and "Losing connection" in down["reason"]
    quiet = link(SGLANG)
    assert quiet["state"] == "unknown"
    assert "SGLang pairs requests by bootstrap room" in quiet["reason"]


def test_mindie_shows_what_it_cannot_see_instead_of_nothing():
    sample = link(MINDIE)
    assert sample["state"] == "unknown" and sample["sources"] == []
    assert any("mindie exports no KV-transfer metrics" in text for text in sample["blind"])
    assert "nothing that can see prefill-0 → decode-0 reported" in sample["reason"]


def test_a_probe_the_decode_pod_refuses_says_nothing_about_the_link_but_silence_does():
    refused = probe_result(P, D, ts=NOW, ok=False, status=503, error="decode answered HTTP 503: overloaded")
    assert probe_says_link_failed(refused) is False
    sample = link(NIXL, probe=refused)
    assert sample["state"] == "unknown" and "could not be tested" in sample["reason"]
    silent = probe_result(
        P, D, ts=NOW, ok=False, status=None, error="no answer from the decode pod within 1.6 s"
    )
    assert probe_says_link_failed(silent) is True
    assert link(NIXL, probe=silent)["state"] == "down"
    kv_error = probe_result(
        P, D, ts=NOW, ok=False, status=500, error="LLM_WAIT_PROCESS_TIMEOUT: pull timed out"
    )
    assert link(NIXL, probe=kv_error)["state"] == "down"


def test_an_old_probe_still_shows_with_its_age_but_no_longer_decides():
    old = probe_result(P, D, ts=NOW - 60, ok=False, status=None, error="no answer")
    sample = link(NIXL, probe=old)
    assert sample["state"] == "unknown" and sample["observed_at"] == NOW - 60


def test_log_reads_continue_where_the_previous_read_ended():
    first = ["a", "b", "c", "d"]
    assert fresh_lines([], first) == first
    assert fresh_lines(["b", "c", "d"], ["c", "d", "e", "f"]) == ["c", "d", "e", "f"]  # tail not found
    assert fresh_lines(["b", "c", "d"], ["a", "b", "c", "d", "e"]) == ["e"]
    assert fresh_lines(["b", "c", "d"], ["b", "c", "d"]) == []


def test_pairs_stay_inside_their_serving_group():
    prefills = [("p0", "10.0.0.1", "g0"), ("p1", "10.0.0.2", "g1")]
    decodes = [("d0", "10.0.0.3", "g0"), ("d1", "10.0.0.4", "g1")]
    assert [(p.prefill, p.decode) for p in pairs_of(prefills, decodes)] == [("p0", "d0"), ("p1", "d1")]
    ungrouped = pairs_of([("p0", "a", "")], [("d0", "b", ""), ("d1", "c", "")])
    assert len(ungrouped) == 2


def test_an_empty_window_is_no_evidence():
    sample = link(NIXL, window=Window())
    assert sample["state"] == "unknown"


def test_the_label_is_the_links_own_mean_transfer_time_even_when_buckets_make_p95s_coincide():
    """Issue 12: transfers of ~14 ms and an ITL of ~12 ms both land in the (10, 25] ms bucket, so both
    interpolated p95s read 24.25 ms — the link looked like it showed the decode TBT p95. The link's
    mean (Δsum / Δcount of its own vllm:nixl_xfer_time_seconds) is exact and is what the label shows."""

    def text(n: int, xfer_sum: float, itl_sum: float) -> str:
        lines = []
        for name, total in (
            ("vllm:nixl_xfer_time_seconds", xfer_sum),
            ("vllm:inter_token_latency_seconds", itl_sum),
        ):
            lines.append(f"# TYPE {name} histogram")
            for le in ("0.005", "0.01"):
                lines.append(f'{name}_bucket{{engine="0",le="{le}"}} 0.0')
            for le in ("0.025", "0.05", "+Inf"):
                lines.append(f'{name}_bucket{{engine="0",le="{le}"}} {float(n)}')
            lines.append(f'{name}_count{{engine="0"}} {float(n)}')
            lines.append(f'{name}_sum{{engine="0"}} {total}')
        return "\n".join(lines) + "\n"

    before = parse_metrics(text(0, 0.0, 0.0), ts=NOW - 2)
    after = parse_metrics(text(20, 20 * 0.014, 20 * 0.012), ts=NOW)
    window = pod_window(after, before)[0]
    sample = link(NIXL, window=window, probe=probe_result(P, D, ts=NOW))
    itl_p95_ms = 1000 * quantile(window.hists["itl"], 0.95)
    assert sample["xfer_p95_ms"] == pytest.approx(itl_p95_ms) == pytest.approx(24.25)  # the coincidence
    assert sample["xfer_mean_ms"] == pytest.approx(14.0)  # the link's own figure
