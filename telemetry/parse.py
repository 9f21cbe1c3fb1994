"""Engine ``/metrics`` exposition → one engine-neutral raw sample (PURE).

vLLM (``vllm:*``), SGLang (``sglang:*``), MindIE (no prefix) and the Mooncake master expose the same
ideas under different names; each known family is mapped onto one canonical field so everything after
this module is engine-neutral. Label sets of one family (data-parallel ``engine`` indices, ``tp_rank``,
``finished_reason``, ...) are summed (counters, histograms, counts) or averaged (ratios).

Lines of families we do not use (process_*, python_gc_*, ...) are dropped before parsing, and so are
labels we never read (``model_name``, ``engine``, ``tp_rank``...: label parsing is most of the parser's
cost); the remaining text is parsed by ``prometheus_client.parser``.
"""

from __future__ import annotations

import math
import re
from typing import TypedDict

from prometheus_client.parser import text_string_to_metric_families

# sample name -> canonical counter field
COUNTERS: dict[str, str] = {
    "vllm:prefix_cache_queries_total": "prefix_queries",
    "vllm:prefix_cache_hits_total": "prefix_hits",
    "vllm:external_prefix_cache_queries_total": "ext_queries",
    "vllm:external_prefix_cache_hits_total": "ext_hits",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "gen_tokens",
    "vllm:num_preemptions_total": "preemptions",
    "vllm:nixl_num_failed_transfers_total": "xfer_failed",
    "vllm:nixl_num_failed_notifications_total": "xfer_failed_notifications",
    "vllm:mooncake_num_failed_transfers_total": "xfer_failed",
    "vllm:mooncake_num_failed_recvs_total": "xfer_failed_recvs",
    "sglang:prompt_tokens_total": "prompt_tokens",
    "sglang:generation_tokens_total": "gen_tokens",
    "sglang:num_transfer_failed_reqs_total": "xfer_failed",
    "sglang:num_bootstrap_failed_reqs_total": "bootstrap_failed",
    "prompt_tokens_total": "prompt_tokens",
    "generation_tokens_total": "gen_tokens",
    "request_success_total": "req_success",
    "request_failed_total": "req_failed",
    "master_successful_evictions_total": "store_evictions",
    "mem_cache_hit_bytes_total": "store_hit_bytes",
    "mooncake_transfer_read_bytes": "transfer_read_bytes",
    "mooncake_transfer_write_bytes": "transfer_write_bytes",
    "mooncake_transfer_read_bytes_total": "transfer_read_bytes",
    "mooncake_transfer_write_bytes_total": "transfer_write_bytes",
}
# vLLM splits finished requests by reason; "abort" is the failure case.
REQUEST_SUCCESS_BY_REASON = "vllm:request_success_total"

# sample name -> canonical gauge field
GAUGES: dict[str, str] = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:gpu_cache_usage_perc": "kv_usage",
    "sglang:num_running_reqs": "running",
    "sglang:num_queue_reqs": "waiting",
    "sglang:token_usage": "kv_usage",
    "sglang:cache_hit_rate": "hit_rate",
    "sglang:gen_throughput": "gen_throughput",
    "sglang:kv_transfer_speed_gb_s": "kv_transfer_speed_gb_s",
    "sglang:kv_transfer_latency_ms": "kv_transfer_latency_ms",
    "sglang:num_decode_transfer_queue_reqs": "transfer_queue",
    "num_requests_running": "running",
    "num_requests_waiting": "waiting",
    "npu_cache_usage_perc": "kv_usage",
    "npu_prefix_cache_hit_rate": "hit_rate",
    "master_allocated_bytes": "store_allocated_bytes",
    "master_total_capacity_bytes": "store_capacity_bytes",
    "master_key_count": "store_keys",
    "master_active_clients": "store_clients",
}
# gauges that are ratios or per-instance levels: averaged over label sets instead of summed
MEAN_GAUGES = frozenset({"kv_usage", "hit_rate", "kv_transfer_latency_ms"})

# histogram base name -> canonical field
HISTOGRAMS: dict[str, str] = {
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:request_time_per_output_token_seconds": "tpot",
    "vllm:e2e_request_latency_seconds": "e2e",
    "vllm:request_queue_time_seconds": "queue_time",
    "vllm:request_prefill_time_seconds": "prefill_time",
    "vllm:request_decode_time_seconds": "decode_time",
    "vllm:nixl_xfer_time_seconds": "xfer_time",
    "vllm:nixl_bytes_transferred": "xfer_bytes",
    "vllm:mooncake_xfer_time_seconds": "xfer_time",
    "vllm:mooncake_bytes_transferred": "xfer_bytes",
    "vllm:mooncake_store_operation_time_seconds": "store_op_time",
    "sglang:time_to_first_token_seconds": "ttft",
    "sglang:inter_token_latency_seconds": "itl",
    "sglang:e2e_request_latency_seconds": "e2e",
    "time_to_first_token_seconds": "ttft",
}
STORE_OPERATION = "vllm:mooncake_store_operation_time_seconds"
INFO = "vllm:cache_config_info"

_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_total", "_info")
_KNOWN_BASES = frozenset(
    [*COUNTERS, *GAUGES, *HISTOGRAMS, REQUEST_SUCCESS_BY_REASON, INFO]
    + [name.removesuffix("_total") for name in COUNTERS]
    + [REQUEST_SUCCESS_BY_REASON.removesuffix("_total"), INFO.removesuffix("_info")]
)


class Histogram(TypedDict):
    """Cumulative buckets as (upper bound, count) sorted by bound (the last is +Inf), sum and count."""

    buckets: list[tuple[float, float]]
    sum: float
    count: float


class RawSample(TypedDict):
    engine: str  # vllm | sglang | mindie | mooncake-master | unknown
    ts: float
    counters: dict[str, float]
    gauges: dict[str, float]
    histograms: dict[str, Histogram]
    info: dict[str, str]


def _metric_name(line: str) -> str:
    if line.startswith("#"):
        parts = line.split(None, 3)
        return parts[2] if len(parts) > 2 else ""
    end = len(line)
    for stop in ("{", " ", "\t"):
        index = line.find(stop)
        if index != -1:
            end = min(end, index)
    return line[:end]


def _is_known(name: str) -> bool:
    if name in _KNOWN_BASES:
        return True
    return any(name.endswith(suffix) and name[: -len(suffix)] in _KNOWN_BASES for suffix in _SUFFIXES)


_LABEL = re.compile(r'\s*([a-zA-Z_]\w*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
KEPT_LABELS = frozenset({"le", "finished_reason", "operation", "status"})


def _strip_labels(line: str) -> str:
    start = line.find("{")
    if start == -1:
        return line
    end = line.rfind("}")
    if end < start:
        return line
    kept = ",".join(f'{m[1]}="{m[2]}"' for m in _LABEL.finditer(line, start + 1, end) if m[1] in KEPT_LABELS)
    return f"{line[:start]}{{{kept}}}{line[end + 1 :]}" if kept else f"{line[:start]}{line[end + 1 :]}"


def relevant_text(text: str) -> str:
    """Keep only the lines (and labels) Tandem reads, ending with a newline as the parser wants."""
    kept = []
    for line in text.splitlines():
        if not line or not _is_known(_metric_name(line)):
            continue
        kept.append(line if line.startswith(("#", INFO)) else _strip_labels(line))
    return "\n".join(kept) + "\n" if kept else ""


def detect_engine(names: set[str]) -> str:
    if any(name.startswith("vllm:") for name in names):
        return "vllm"
    if any(name.startswith("sglang:") for name in names):
        return "sglang"
    if any(name.startswith("master_") for name in names):
        return "mooncake-master"
    if names & {"npu_cache_usage_perc", "npu_prefix_cache_hit_rate", "num_requests_running"}:
        return "mindie"
    return "unknown"


def parse_metrics(text: str, *, ts: float) -> RawSample:
    """Parse one exposition. Raises ``ValueError`` when the text is not Prometheus text format."""
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    gauge_n: dict[str, int] = {}
    hist_buckets: dict[str, dict[float, float]] = {}
    hist_sum: dict[str, float] = {}
    hist_count: dict[str, float] = {}
    info: dict[str, str] = {}
    names: set[str] = set()

    for family in text_string_to_metric_families(relevant_text(text)):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, float(sample.value)
            names.add(name)
            if math.isnan(value) or name.endswith("_created"):
                continue
            if name == REQUEST_SUCCESS_BY_REASON:
                field = "req_aborted" if labels.get("finished_reason") == "abort" else "req_success"
                counters[field] = counters.get(field, 0.0) + value
            elif name in COUNTERS:
                field = COUNTERS[name]
                counters[field] = counters.get(field, 0.0) + value
            elif name in GAUGES:
                field = GAUGES[name]
                gauges[field] = gauges.get(field, 0.0) + value
                gauge_n[field] = gauge_n.get(field, 0) + 1
            elif name == INFO:
                info.update({k: v for k, v in labels.items() if k not in ("model_name", "engine")})
            else:
                base, _, part = name.rpartition("_")
                if base not in HISTOGRAMS:
                    continue
                field = HISTOGRAMS[base]
                if part == "bucket":
                    le = float(labels.get("le", "inf"))
                    buckets = hist_buckets.setdefault(field, {})
                    buckets[le] = buckets.get(le, 0.0) + value
                elif part == "sum":
                    hist_sum[field] = hist_sum.get(field, 0.0) + value
                elif part == "count":
                    hist_count[field] = hist_count.get(field, 0.0) + value
                    if base == STORE_OPERATION and labels.get("status", "success") not in ("success", "ok"):
                        counters["store_op_failed"] = counters.get("store_op_failed", 0.0) + value

    for field, count in gauge_n.items():
        if field in MEAN_GAUGES and count > 1:
            gauges[field] /= count
    histograms: dict[str, Histogram] = {}
    for field in set(hist_buckets) | set(hist_count):
        ordered = sorted(hist_buckets.get(field, {}).items())
        total = hist_count.get(field, ordered[-1][1] if ordered else 0.0)
        if not ordered or not math.isinf(ordered[-1][0]):
            ordered.append((math.inf, total))
        histograms[field] = Histogram(buckets=ordered, sum=hist_sum.get(field, 0.0), count=total)
    return RawSample(
        engine=detect_engine(names),
        ts=ts,
        counters=counters,
        gauges=gauges,
        histograms=histograms,
        info=info,
    )
