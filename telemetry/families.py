"""The metric families Tandem reads, by engine, and the canonical field each maps onto (PURE data).

``telemetry.parse`` maps every sample of a known family onto one engine-neutral field with these
tables; a family not named here is dropped before parsing. Each table says where its names come from.
"""

from __future__ import annotations

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
    "vllm:nixl_num_kv_expired_reqs_total": "xfer_expired",
    "vllm:nixl_num_notifications_after_expiry_total": "xfer_notified_after_expiry",
    "vllm:mooncake_num_kv_expired_reqs_total": "xfer_expired",
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
# Answers by HTTP status class: vLLM's API server (prometheus-fastapi-instrumentator:
# ``http_requests_total{handler,method,status}``, status grouped as 2xx/4xx/5xx or exact codes) and the
# Kthena router (``kthena_router_requests_total{status_code,error_type,...}``). They see the answers an
# engine's request counters never count: a 503 from an overloaded server, a 429, a proxy error.
HTTP_REQUESTS = "http_requests_total"
ROUTER_REQUESTS = "kthena_router_requests_total"
# Every route a real vLLM (0.32) generates on: OpenAI completions and chat, the Responses API and
# Anthropic's Messages API (the handler label is the route's path template).
INFERENCE_HANDLERS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/messages"})
# Where an engine's prompt tokens came from (vLLM ``vllm/v1/metrics/loggers.py``, sources from
# ``PromptTokenStats.ALL_SOURCES`` in ``vllm/v1/metrics/stats.py``): ``local_compute`` (prefilled here),
# ``local_cache_hit`` (this engine's prefix cache), ``external_kv_transfer`` (received through the KV
# connector). On a decode pod, local compute beyond the last partial block means the KV never arrived.
PROMPT_BY_SOURCE = "vllm:prompt_tokens_by_source_total"
PROMPT_SOURCES = {
    "local_compute": "prompt_local_compute",
    "local_cache_hit": "prompt_local_cache_hit",
    "external_kv_transfer": "prompt_external_kv",
}
# Mooncake's TENT transfer engine (its own /metrics, ``mooncake-transfer-engine/tent/src/metrics/
# tent_metrics.cpp``): bytes per transport and failovers between transports (``from``/``to``: rdma, tcp,
# nvlink, ...). A transfer that fell back from RDMA to TCP still succeeds, only slower.
TENT_FAILOVER = "tent_transport_failover_total"
TENT_BYTES = ("tent_read_bytes_total", "tent_write_bytes_total")
# Kthena's router (``pkg/kthena-router/metrics/metrics.go``): per prefix-cache match attempt, the share of
# the prompt's blocks the best candidate pod held (0 = miss), labelled by ``model``. One router serves
# every model, so its buckets are kept per model: field ``router_match_ratio:<model>``.
MATCH_RATIO = "kthena_router_prefix_cache_match_ratio"
MATCH_FIELD = "router_match_ratio:"

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
    "vllm:nixl_xfer_time_seconds": "xfer_time",
    "vllm:nixl_bytes_transferred": "xfer_bytes",
    "vllm:mooncake_xfer_time_seconds": "xfer_time",
    "vllm:mooncake_bytes_transferred": "xfer_bytes",
    "vllm:mooncake_store_operation_time_seconds": "store_op_time",
    "sglang:time_to_first_token_seconds": "ttft",
    "sglang:inter_token_latency_seconds": "itl",
    "sglang:e2e_request_latency_seconds": "e2e",  # its count stands in for finished requests (no counter)
    "time_to_first_token_seconds": "ttft",
}
# Families Tandem recognises but does not read: nothing is derived from them (TTFT, TBT and the
# request counters already say it), and every bucket line costs parsing time on every scrape.
NOT_READ: dict[str, str] = {
    "vllm:request_time_per_output_token_seconds": "per-request mean TPOT; ITL covers it",
    "vllm:e2e_request_latency_seconds": "end-to-end latency; finished requests come from request_success",
    "vllm:request_queue_time_seconds": "queue time; num_requests_waiting shows queueing",
    "vllm:request_prefill_time_seconds": "prefill time; TTFT covers it",
    "vllm:request_decode_time_seconds": "decode time; ITL covers it",
}
STORE_OPERATION = "vllm:mooncake_store_operation_time_seconds"
INFO = "vllm:cache_config_info"

_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_total", "_info")
_KNOWN_BASES = frozenset(
    [
        *COUNTERS,
        *GAUGES,
        *HISTOGRAMS,
        REQUEST_SUCCESS_BY_REASON,
        INFO,
        HTTP_REQUESTS,
        ROUTER_REQUESTS,
        MATCH_RATIO,
    ]
    + [PROMPT_BY_SOURCE, TENT_FAILOVER, *TENT_BYTES]
    + [name.removesuffix("_total") for name in (*COUNTERS, PROMPT_BY_SOURCE, TENT_FAILOVER, *TENT_BYTES)]
    + [REQUEST_SUCCESS_BY_REASON.removesuffix("_total"), INFO.removesuffix("_info")]
    + [HTTP_REQUESTS.removesuffix("_total"), ROUTER_REQUESTS.removesuffix("_total")]
)
