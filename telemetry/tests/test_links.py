from __future__ import annotations

import pytest

from telemetry.derive import pod_window
from telemetry.links import decode_links, link_state, normalize_table
from telemetry.parse import parse_metrics
from telemetry.tests.exposition import vllm_text


def table(status="LLM_SUCCESS", transfers=10, failures=0, nbytes=10_000_000, seconds=0.2, peer="prefill-0"):
    """A decode pod's /kv/links answer (LLM-DataDist semantics), as the engines serve it."""
    return {
        "pod": "decode-2",
        "address": "127.0.0.12:8000",
        "role": "decode",
        "links": [
            {
                "peer": peer,
                "peer_address": "127.0.0.10:8000",
                "direction": "pull",
                "status": status,
                "state": "linked",
                "transfers": transfers,
                "failures": failures,
                "bytes": nbytes,
                "xfer_seconds_sum": seconds,
                "xfer_seconds_max": 0.05,
            }
        ],
    }


def entries(payload):
    return normalize_table(payload, {"127.0.0.10": "prefill-0"})


@pytest.mark.parametrize(
    ("status", "transfers", "failed", "p95", "expected"),
    [
        ("LLM_SUCCESS", 10, 0, 20.0, "up"),
        ("LLM_SUCCESS", 0, 0, None, "up"),
        ("LLM_WAIT_PROCESS_TIMEOUT", 10, 0, 20.0, "down"),
        ("LLM_LINK_FAILED", 0, 0, None, "down"),
        ("LLM_NOT_YET_LINK", 0, 0, None, "down"),
        ("LLM_SUCCESS", 0, 4, None, "down"),
        ("LLM_SUCCESS", 8, 2, 20.0, "degraded"),
        ("LLM_SUCCESS", 10, 0, 900.0, "degraded"),
        ("LLM_KV_CACHE_NOT_EXIST", 3, 0, 20.0, "up"),
    ],
)
def test_link_state_rules(status, transfers, failed, p95, expected):
    assert (
        link_state(status_code=status, transfers=transfers, failed=failed, p95_ms=p95, slow_ms=250)
        == expected
    )


def test_table_rows_name_the_prefill_pod_even_when_only_the_address_is_known():
    payload = table(peer="")
    assert entries(payload)[0]["peer"] == "prefill-0"
    assert entries(table())[0]["xfer_ms_total"] == pytest.approx(200)


def test_link_down_while_the_status_reports_timeout_names_both_pods_and_the_fix():
    [link] = decode_links(
        decode="decode-2",
        table=entries(table(status="LLM_WAIT_PROCESS_TIMEOUT")),
        previous=entries(table()),
        window=None,
        interval_s=2.0,
    )
    assert link["state"] == "down"
    assert link["reason"] == (
        "decode-2 cannot pull KV from prefill-0: LLM_WAIT_PROCESS_TIMEOUT; the link must be re-established"
    )


def test_failed_transfers_in_the_interval_take_the_link_down():
    [link] = decode_links(
        decode="decode-2",
        table=entries(table(transfers=10, failures=5)),
        previous=entries(table(transfers=10, failures=0)),
        window=None,
        interval_s=2.0,
    )
    assert (link["state"], link["failed"], link["transfers"]) == ("down", 5, 0)
    assert "all 5 transfers failed" in link["reason"]


def test_some_failures_degrade_the_link_and_rates_come_from_table_increments():
    [link] = decode_links(
        decode="decode-2",
        table=entries(table(transfers=18, failures=2, nbytes=30_000_000, seconds=0.36)),
        previous=entries(table(transfers=10, failures=0, nbytes=10_000_000, seconds=0.2)),
        window=None,
        interval_s=2.0,
    )
    assert link["state"] == "degraded"
    assert link["reason"] == "2 of 10 KV transfers from prefill-0 to decode-2 failed in the last 2 s"
    assert link["bytes_per_s"] == pytest.approx(10_000_000)
    assert link["xfer_p50_ms"] == pytest.approx(20.0)  # 160 ms over 8 transfers


def test_single_active_link_gets_the_pods_connector_histogram_quantiles():
    before = parse_metrics(vllm_text(xfer=[0] * 13), ts=0.0)
    after = parse_metrics(vllm_text(xfer=[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20, 20, 20]), ts=2.0)
    window, _ = pod_window(after, before)
    [link] = decode_links(
        decode="decode-2",
        table=entries(table(transfers=30)),
        previous=entries(table(transfers=10)),
        window=window,
        interval_s=2.0,
    )
    assert 500 < link["xfer_p95_ms"] <= 1000
    assert link["state"] == "degraded"
    assert "are slow: p95" in link["reason"]


def test_a_link_seen_for_the_first_time_has_no_rates_yet():
    [link] = decode_links(
        decode="decode-2", table=entries(table()), previous=None, window=None, interval_s=2.0
    )
    assert link["state"] == "up" and link["bytes_per_s"] is None and link["failed"] == 0


def test_a_reset_link_table_counts_from_the_new_values():
    [link] = decode_links(
        decode="decode-2",
        table=entries(table(transfers=3, failures=0, nbytes=3_000_000, seconds=0.06)),
        previous=entries(table(transfers=500, failures=7, nbytes=900_000_000, seconds=10.0)),
        window=None,
        interval_s=2.0,
    )
    assert link["transfers"] == 3 and link["failed"] == 0 and link["state"] == "up"
    assert link["bytes_per_s"] == pytest.approx(1_500_000)


def test_malformed_table_is_refused():
    with pytest.raises(ValueError):
        normalize_table({"links": "nope"}, {})
