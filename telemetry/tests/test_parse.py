from __future__ import annotations

import math

import pytest

from telemetry.parse import parse_metrics, relevant_text
from telemetry.tests.exposition import mindie_text, mooncake_master_text, sglang_text, vllm_text


def test_vllm_counters_are_summed_over_data_parallel_engines():
    raw = parse_metrics(vllm_text(queries=1000, hits=600), ts=1.0)
    assert raw["engine"] == "vllm"
    assert raw["counters"]["prefix_queries"] == 1000
    assert raw["counters"]["prefix_hits"] == 600
    assert raw["counters"]["ext_queries"] == 400
    assert raw["counters"]["ext_hits"] == 100
    assert raw["counters"]["prompt_tokens"] == 5000
    assert raw["counters"]["gen_tokens"] == 2000
    assert raw["counters"]["preemptions"] == 0


def test_vllm_finished_requests_split_by_reason_abort_counts_as_failure():
    raw = parse_metrics(vllm_text(ok=40, aborted=2), ts=1.0)
    assert raw["counters"]["req_success"] == 40
    assert raw["counters"]["req_aborted"] == 2


def test_vllm_gauges_add_queues_and_average_kv_usage():
    raw = parse_metrics(vllm_text(running=3, waiting=1, kv=0.25), ts=1.0)
    assert raw["gauges"]["running"] == 3
    assert raw["gauges"]["waiting"] == 1
    assert raw["gauges"]["kv_usage"] == pytest.approx(0.25)


def test_vllm_histograms_keep_buckets_and_merge_label_sets():
    raw = parse_metrics(vllm_text(), ts=1.0)
    ttft = raw["histograms"]["ttft"]
    assert ttft["count"] == 42
    assert ttft["sum"] == pytest.approx(3.0)
    assert ttft["buckets"][0] == (0.001, 0.0)
    assert math.isinf(ttft["buckets"][-1][0]) and ttft["buckets"][-1][1] == 42
    assert [le for le, _ in ttft["buckets"]] == sorted(le for le, _ in ttft["buckets"])
    assert raw["histograms"]["itl"]["count"] == 1000
    # recognised but not read: nothing is derived from them
    assert set(raw["histograms"]) == {"ttft", "itl", "xfer_time", "xfer_bytes"}


def test_vllm_cache_config_info_labels_are_kept():
    raw = parse_metrics(vllm_text(), ts=1.0)
    assert raw["info"]["block_size"] == "16"
    assert raw["info"]["num_gpu_blocks"] == "8192"


@pytest.mark.parametrize("connector", ["nixl", "mooncake"])
def test_vllm_connector_families_map_to_the_same_fields(connector):
    raw = parse_metrics(vllm_text(connector=connector, failed_transfers=3), ts=1.0)
    assert raw["histograms"]["xfer_time"]["count"] == 40
    assert raw["histograms"]["xfer_bytes"]["count"] == 40
    assert raw["histograms"]["xfer_bytes"]["sum"] == pytest.approx(1.6e9)
    assert raw["counters"]["xfer_failed"] == 3
    second = "xfer_failed_notifications" if connector == "nixl" else "xfer_failed_recvs"
    assert raw["counters"][second] == 1


def test_mooncake_store_operations_count_failed_ones():
    raw = parse_metrics(vllm_text(connector="mooncake"), ts=1.0)
    assert raw["histograms"]["store_op_time"]["count"] == 13
    assert raw["counters"]["store_op_failed"] == 3


def test_sglang_families_map_to_the_same_fields():
    raw = parse_metrics(sglang_text(), ts=1.0)
    assert raw["engine"] == "sglang"
    assert raw["gauges"]["hit_rate"] == pytest.approx(0.42)
    assert raw["gauges"]["running"] == 7
    assert raw["gauges"]["waiting"] == 2
    assert raw["gauges"]["kv_usage"] == pytest.approx(0.61)
    assert raw["gauges"]["gen_throughput"] == pytest.approx(812.5)
    assert raw["gauges"]["kv_transfer_speed_gb_s"] == pytest.approx(11.2)
    assert raw["gauges"]["kv_transfer_latency_ms"] == pytest.approx(18.0)
    assert raw["gauges"]["transfer_queue"] == 1
    assert raw["counters"]["prompt_tokens"] == 3000
    assert raw["counters"]["gen_tokens"] == 900
    assert raw["counters"]["xfer_failed"] == 3
    assert raw["counters"]["bootstrap_failed"] == 1
    assert {"ttft", "itl", "e2e"} <= set(raw["histograms"])


def test_mindie_unprefixed_families_map_to_the_same_fields():
    raw = parse_metrics(mindie_text(), ts=1.0)
    assert raw["engine"] == "mindie"
    assert raw["gauges"] == pytest.approx({"running": 4, "waiting": 6, "kv_usage": 0.73, "hit_rate": 0.35})
    assert raw["counters"] == pytest.approx(
        {"prompt_tokens": 800, "gen_tokens": 300, "req_success": 20, "req_failed": 1}
    )
    assert raw["histograms"]["ttft"]["count"] == 15


def test_mooncake_master_families_are_read():
    raw = parse_metrics(mooncake_master_text(), ts=1.0)
    assert raw["engine"] == "mooncake-master"
    assert raw["gauges"]["store_allocated_bytes"] == 3.0e9
    assert raw["gauges"]["store_capacity_bytes"] == 12.0e9
    assert raw["gauges"]["store_keys"] == 1520
    assert raw["gauges"]["store_clients"] == 4
    assert raw["counters"]["store_evictions"] == 12
    assert raw["counters"]["store_hit_bytes"] == 5.5e9
    assert raw["counters"]["transfer_read_bytes"] == 7.0e9
    assert raw["counters"]["transfer_write_bytes"] == 6.0e9


def test_unused_families_and_labels_are_dropped_before_parsing():
    text = relevant_text(vllm_text())
    assert "python_gc" not in text and "process_resident" not in text
    samples = [line for line in text.splitlines() if not line.startswith(("#", "vllm:cache_config_info"))]
    assert samples and not any("model_name" in line or 'engine="' in line for line in samples)
    assert 'finished_reason="abort"' in text and 'le="0.1"' in text


def test_escaped_label_values_survive_label_stripping():
    text = (
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{model_name="a \\"quoted\\", name",engine="0"} 5\n'
    )
    assert parse_metrics(text, ts=1.0)["gauges"]["waiting"] == 5


def test_text_that_is_not_prometheus_format_raises_value_error():
    with pytest.raises(ValueError):
        parse_metrics("vllm:num_requests_waiting{engine=0 five\n", ts=1.0)


def test_empty_exposition_gives_an_empty_sample():
    raw = parse_metrics("", ts=2.0)
    assert raw == {"engine": "unknown", "ts": 2.0, "counters": {}, "gauges": {}, "histograms": {}, "info": {}}


def test_a_target_parser_reuses_unchanged_lines_and_reads_changed_ones():
    from telemetry.parse import LineParser

    parser = LineParser()
    first = parser.parse(vllm_text(queries=1000, hits=600, waiting=1), ts=1.0)
    second = parser.parse(vllm_text(queries=1400, hits=900, waiting=4), ts=3.0)
    assert (first["counters"]["prefix_hits"], second["counters"]["prefix_hits"]) == (600, 900)
    assert second["gauges"]["waiting"] == 4
    assert second["histograms"] == first["histograms"]
    assert second == parse_metrics(vllm_text(queries=1400, hits=900, waiting=4), ts=3.0)


def test_duplicate_lines_count_twice_as_the_exposition_says():
    text = "vllm:num_requests_waiting 2\nvllm:num_requests_waiting 2\n"
    from telemetry.parse import LineParser

    parser = LineParser()
    assert parser.parse(text, ts=1.0)["gauges"]["waiting"] == 4
    assert parser.parse(text, ts=2.0)["gauges"]["waiting"] == 4


def test_an_idle_target_gives_the_same_sample_at_the_new_time_and_a_vanished_family_is_noticed():
    from telemetry.parse import LineParser

    parser = LineParser()
    text = vllm_text()
    first = parser.parse(text, ts=1.0)
    idle = parser.parse(text, ts=3.0)
    assert idle["ts"] == 3.0 and {**idle, "ts": 1.0} == first
    without_waiting = "\n".join(line for line in text.splitlines() if "num_requests_waiting" not in line)
    assert "waiting" not in parser.parse(without_waiting, ts=5.0)["gauges"]


def test_a_target_parser_reads_a_family_without_help_inside_an_unread_familys_block():
    from telemetry.parse import LineParser

    def text(running: int, cpu: float) -> str:
        return (
            "# HELP process_cpu_seconds_total CPU\n# TYPE process_cpu_seconds_total counter\n"
            f"process_cpu_seconds_total {cpu}\n# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{engine="0"}} {running}\n'
            "# HELP vllm:num_requests_waiting W\n# TYPE vllm:num_requests_waiting gauge\n"
            "vllm:num_requests_waiting 1\n"
        )

    parser = LineParser()
    assert parser.parse(text(2, 1.5), ts=1.0)["gauges"] == {"running": 2, "waiting": 1}
    assert parser.parse(text(2, 1.75), ts=2.0)["gauges"] == {"running": 2, "waiting": 1}
    assert parser.parse(text(5, 1.75), ts=3.0)["gauges"] == {"running": 5, "waiting": 1}


def test_a_target_parser_rejects_a_malformed_value_of_a_known_series_then_reads_the_next_scrape():
    from telemetry.parse import LineParser

    parser = LineParser()
    parser.parse("vllm:num_requests_waiting 2\n", ts=1.0)
    with pytest.raises(ValueError):
        parser.parse("vllm:num_requests_waiting 2_0\n", ts=2.0)
    with pytest.raises(ValueError):
        parser.parse("vllm:num_requests_waiting two\n", ts=2.0)
    assert parser.parse("vllm:num_requests_waiting 3 1700000000000\n", ts=3.0)["gauges"]["waiting"] == 3
