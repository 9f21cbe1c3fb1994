"""One engine's statistics and their `/metrics` rendering with each engine's own names.

vLLM: the `vllm:*` families of metrics.md, labels `model_name` and `engine` ("0"). Connector
families follow the configured connector's transfer family: NixlConnector → `vllm:nixl_*`;
Mooncake connectors → `vllm:mooncake_*` (plus `vllm:mooncake_store_operation_time_seconds` when a
Mooncake Store master is configured). LLM-DataDist (vllm-ascend `LLMDataDistCMgrConnector`,
MindIE) exports no KV-transfer families upstream and so none here: its per-link transfer counts,
bytes, times and failures are in the engine's `GET /kv/links` table.
SGLang: `sglang:*` with labels `model_name`, `engine_type` (prefill | decode | unified), `tp_rank`,
`pp_rank`, and the P/D transfer families on prefill/decode engines.
MindIE: unprefixed names, label `model_name`, only when `MIES_SERVICE_MONITOR_MODE=1` (else 500 with
MindIE's error body).
Histogram buckets are vLLM's, with a few finer buckets below its first one so that a time-scaled
sandbox still spreads its latencies across buckets.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.model.stats import EngineStats
from sandbox.engine.exposition import Writer


@dataclass(frozen=True)
class Gauges:
    running: int
    waiting: int
    kv_usage: float
    pulling: int
    block_size: int
    num_gpu_blocks: int


def render(
    engine: str,
    role: str,
    model: str,
    connector_family: str | None,
    has_store: bool,
    stats: EngineStats,
    g: Gauges,
) -> str:
    if engine == "sglang":
        return _render_sglang(role, model, connector_family, stats, g)
    if engine == "mindie":
        return _render_mindie(model, stats, g)
    return _render_vllm(model, connector_family, has_store, stats, g)


def _render_vllm(model: str, family: str | None, has_store: bool, s: EngineStats, g: Gauges) -> str:
    base = {"model_name": model, "engine": "0"}
    w = Writer()
    w.gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", [(base, g.running)]
    )
    w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [(base, g.waiting)])
    w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", [(base, g.kv_usage)])
    w.counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        [(base, s.prefix_queries)],
    )
    w.counter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        [(base, s.prefix_hits)],
    )
    w.counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV connector.",
        [(base, s.external_queries)],
    )
    w.counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV connector.",
        [(base, s.external_hits)],
    )
    w.counter(
        "vllm:num_preemptions", "Cumulative number of preemption from the engine.", [(base, s.preemptions)]
    )
    w.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(base, s.prompt_tokens)])
    w.counter(
        "vllm:prompt_tokens_by_source",
        "Number of prompt tokens by source.",
        [({**base, "source": src}, n) for src, n in s.prompt_sources.items()],
    )
    w.counter(
        "vllm:generation_tokens", "Number of generation tokens processed.", [(base, s.generation_tokens)]
    )
    w.counter(
        "vllm:request_success",
        "Count of successfully processed requests.",
        [({**base, "finished_reason": r}, n) for r, n in s.finished.items()],
    )
    w.histogram(
        "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", [(base, s.ttft)]
    )
    w.histogram(
        "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", [(base, s.itl)]
    )
    w.histogram(
        "vllm:request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        [(base, s.tpot)],
    )
    w.histogram(
        "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", [(base, s.e2e)]
    )
    w.histogram(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        [(base, s.queue)],
    )
    w.histogram(
        "vllm:request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        [(base, s.prefill)],
    )
    w.histogram(
        "vllm:request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        [(base, s.decode)],
    )
    w.counter(
        "http_requests",
        "Total number of requests by method, status and handler.",
        [({"handler": h, "method": m, "status": st}, n) for (h, m, st), n in sorted(s.http.items())],
    )
    info = {  # a subset of vLLM 0.32's labels (no model_name: the real family has none)
        "engine": base["engine"],
        "block_size": str(g.block_size),
        "num_gpu_blocks": str(g.num_gpu_blocks),
        "enable_prefix_caching": "True",
        "cache_dtype": "auto",
    }
    w.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", [(info, 1.0)])
    if family == "nixl":
        w.histogram(
            "vllm:nixl_xfer_time_seconds",
            "Histogram of transfer duration for NIXL KV Cache transfers.",
            [(base, s.xfer_time)],
        )
        w.histogram(
            "vllm:nixl_bytes_transferred",
            "Histogram of bytes transferred per NIXL KV Cache transfers.",
            [(base, s.xfer_bytes)],
        )
        w.counter(
            "vllm:nixl_num_failed_transfers",
            "Number of failed NIXL KV Cache transfers.",
            [(base, s.failed_transfers)],
        )
        w.counter(
            "vllm:nixl_num_failed_notifications",
            "Number of failed NIXL KV Cache notifications.",
            [(base, s.failed_recvs)],
        )
        w.counter(
            "vllm:nixl_num_kv_expired_reqs",
            "Number of requests that had their KV expire. NOTE: This metric is tracked on the P instance.",
            [(base, s.kv_expired)],
        )
    elif family == "mooncake":
        w.histogram(
            "vllm:mooncake_xfer_time_seconds",
            "Histogram of transfer duration for Mooncake KV transfers.",
            [(base, s.xfer_time)],
        )
        w.histogram(
            "vllm:mooncake_bytes_transferred",
            "Histogram of bytes transferred per Mooncake KV transfer.",
            [(base, s.xfer_bytes)],
        )
        w.counter(
            "vllm:mooncake_num_failed_transfers",
            "Number of failed Mooncake KV transfers.",
            [(base, s.failed_transfers)],
        )
        w.counter(
            "vllm:mooncake_num_failed_recvs",
            "Number of failed Mooncake KV receives.",
            [(base, s.failed_recvs)],
        )
        if has_store:
            samples = [
                ({**base, "operation": op, "status": st}, h) for (op, st), h in sorted(s.store_ops.items())
            ]
            w.histogram(
                "vllm:mooncake_store_operation_time_seconds", "Mooncake Store operation latency.", samples
            )
    return w.text()


def _render_sglang(role: str, model: str, family: str | None, s: EngineStats, g: Gauges) -> str:
    engine_type = {"prefill": "prefill", "decode": "decode"}.get(role, "unified")
    base = {"model_name": model, "engine_type": engine_type, "tp_rank": "0", "pp_rank": "0"}
    w = Writer()
    hit_rate = s.prefix_hits / s.prefix_queries if s.prefix_queries else 0.0
    w.gauge("sglang:num_running_reqs", "The number of running requests.", [(base, g.running)])
    w.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", [(base, g.waiting)])
    w.gauge("sglang:token_usage", "The token usage.", [(base, g.kv_usage)])
    w.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", [(base, hit_rate)])
    w.gauge("sglang:gen_throughput", "The generation throughput (token/s).", [(base, s.gen_throughput())])
    w.counter("sglang:prompt_tokens", "Number of prefill tokens processed.", [(base, s.prompt_tokens)])
    w.counter(
        "sglang:generation_tokens", "Number of generation tokens processed.", [(base, s.generation_tokens)]
    )
    w.histogram(
        "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", [(base, s.ttft)]
    )
    w.histogram(
        "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", [(base, s.itl)]
    )
    w.histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        [(base, s.e2e)],
    )
    if role in ("prefill", "decode") and family is not None:
        speed = s.last_xfer_bytes / s.last_xfer_seconds / 1e9 if s.last_xfer_seconds else 0.0
        w.gauge(
            "sglang:kv_transfer_speed_gb_s", "The transfer speed of the KV cache in GB/s.", [(base, speed)]
        )
        w.gauge(
            "sglang:kv_transfer_latency_ms",
            "The transfer latency of the KV cache in ms.",
            [(base, s.last_xfer_seconds * 1000)],
        )
        w.gauge(
            "sglang:num_decode_transfer_queue_reqs",
            "The number of requests in the decode transfer queue.",
            [(base, g.pulling)],
        )
        w.counter(
            "sglang:num_transfer_failed_reqs",
            "The number of requests whose KV transfer failed.",
            [(base, s.failed_transfers)],
        )
        w.counter(
            "sglang:num_bootstrap_failed_reqs",
            "The number of requests whose bootstrap failed.",
            [(base, s.failed_recvs)],
        )
    return w.text()


def _render_mindie(model: str, s: EngineStats, g: Gauges) -> str:
    base = {"model_name": model}
    w = Writer()
    hit_rate = s.prefix_hits / s.prefix_queries if s.prefix_queries else 0.0
    w.gauge("num_requests_running", "Number of requests currently running on NPU.", [(base, g.running)])
    w.gauge("num_requests_waiting", "Number of requests waiting to be processed.", [(base, g.waiting)])
    w.gauge("npu_cache_usage_perc", "NPU KV-cache usage. 1 means 100 percent usage.", [(base, g.kv_usage)])
    w.gauge("npu_prefix_cache_hit_rate", "NPU prefix cache block hit rate.", [(base, hit_rate)])
    w.counter("prompt_tokens", "Number of prefill tokens processed.", [(base, s.prompt_tokens)])
    w.counter("generation_tokens", "Number of generation tokens processed.", [(base, s.generation_tokens)])
    w.counter(
        "request_success",
        "Count of successfully processed requests.",
        [(base, s.finished["stop"] + s.finished["length"])],
    )
    w.counter("request_failed", "Count of failed requests.", [(base, s.failed_requests)])
    w.histogram(
        "time_to_first_token_seconds", "Histogram of time to first token in seconds.", [(base, s.ttft)]
    )
    return w.text()
