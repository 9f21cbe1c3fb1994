"""Realistic /metrics texts for the parsing and derivation tests, written the way each engine prints them."""

from __future__ import annotations

MODEL = 'model_name="deepseek-ai/DeepSeek-R1"'
TTFT_BOUNDS = ("0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "1.0", "2.5")
ITL_BOUNDS = ("0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75", "1.0")


def histogram(
    name: str, bounds: tuple[str, ...], cumulative: list[int], total_sum: float, labels: str
) -> str:
    """A histogram family; ``cumulative`` has one count per bound plus the +Inf count."""
    lines = [f"# HELP {name} {name} in seconds.", f"# TYPE {name} histogram"]
    for bound, count in zip((*bounds, "+Inf"), cumulative, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(count)}')
    lines.append(f"{name}_count{{{labels}}} {float(cumulative[-1])}")
    lines.append(f"{name}_sum{{{labels}}} {total_sum}")
    return "\n".join(lines)


def counter(name: str, samples: list[tuple[str, float]]) -> str:
    lines = [f"# HELP {name}_total {name}.", f"# TYPE {name}_total counter"]
    lines += [f"{name}_total{{{labels}}} {value}" for labels, value in samples]
    lines += [f"{name}_created{{{labels}}} 1.7e9" for labels, _ in samples]
    return "\n".join(lines)


def gauge(name: str, samples: list[tuple[str, float]]) -> str:
    lines = [f"# HELP {name} {name}.", f"# TYPE {name} gauge"]
    lines += [f"{name}{{{labels}}} {value}" if labels else f"{name} {value}" for labels, value in samples]
    return "\n".join(lines)


def vllm_text(
    *,
    queries: float = 1000,
    hits: float = 600,
    ext_queries: float = 400,
    ext_hits: float = 100,
    prompt: float = 5000,
    generated: float = 2000,
    ok: float = 40,
    aborted: float = 2,
    ttft: list[int] | None = None,
    itl: list[int] | None = None,
    running: float = 3,
    waiting: float = 1,
    kv: float = 0.25,
    connector: str = "nixl",
    xfer: list[int] | None = None,
    failed_transfers: float = 0,
) -> str:
    """A vLLM V1 exposition with two data-parallel engines (labels engine="0"/"1"), as vLLM prints."""
    e0, e1 = f'engine="0",{MODEL}', f'engine="1",{MODEL}'
    ttft = ttft or [0, 0, 1, 4, 10, 20, 30, 35, 40, 42, 42, 42, 42]
    itl = itl or [100, 300, 600, 800, 900, 950, 980, 990, 1000, 1000, 1000, 1000, 1000]
    xfer = xfer or [0, 2, 5, 10, 20, 30, 36, 40, 40, 40, 40, 40, 40]
    half = [c // 2 for c in ttft]
    parts = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 1234.0',
        "process_resident_memory_bytes 1.2e9",
        gauge("vllm:num_requests_running", [(e0, running - 1), (e1, 1)]),
        gauge("vllm:num_requests_waiting", [(e0, waiting), (e1, 0)]),
        gauge("vllm:kv_cache_usage_perc", [(e0, kv), (e1, kv)]),
        counter("vllm:prefix_cache_queries", [(e0, queries / 2), (e1, queries / 2)]),
        counter("vllm:prefix_cache_hits", [(e0, hits / 2), (e1, hits / 2)]),
        counter("vllm:external_prefix_cache_queries", [(e0, ext_queries)]),
        counter("vllm:external_prefix_cache_hits", [(e0, ext_hits)]),
        counter("vllm:prompt_tokens", [(e0, prompt)]),
        counter("vllm:generation_tokens", [(e0, generated)]),
        counter(
            "vllm:request_success",
            [
                (f'{e0},finished_reason="stop"', ok * 0.75),
                (f'{e0},finished_reason="length"', ok * 0.25),
                (f'{e0},finished_reason="abort"', aborted),
            ],
        ),
        counter("vllm:num_preemptions", [(e0, 0)]),
        histogram("vllm:time_to_first_token_seconds", TTFT_BOUNDS, half, 1.5, e0),
        histogram(
            "vllm:time_to_first_token_seconds",
            TTFT_BOUNDS,
            [c - h for c, h in zip(ttft, half, strict=True)],
            1.5,
            e1,
        ),
        histogram("vllm:inter_token_latency_seconds", ITL_BOUNDS, itl, 30.0, e0),
        histogram("vllm:request_time_per_output_token_seconds", ITL_BOUNDS, itl, 30.0, e0),
        histogram("vllm:e2e_request_latency_seconds", TTFT_BOUNDS, ttft, 40.0, e0),
        histogram("vllm:request_queue_time_seconds", TTFT_BOUNDS, ttft, 1.0, e0),
        histogram("vllm:request_prefill_time_seconds", TTFT_BOUNDS, ttft, 1.0, e0),
        histogram("vllm:request_decode_time_seconds", TTFT_BOUNDS, ttft, 30.0, e0),
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",{MODEL},num_gpu_blocks="8192"}} 1.0',
    ]
    if connector in ("nixl", "mooncake"):
        parts += [
            histogram(f"vllm:{connector}_xfer_time_seconds", TTFT_BOUNDS, xfer, 1.2, e0),
            histogram(
                f"vllm:{connector}_bytes_transferred", ("1e6", "1e7", "1e8"), [0, 10, 40, 40], 1.6e9, e0
            ),
            counter(f"vllm:{connector}_num_failed_transfers", [(e0, failed_transfers)]),
        ]
        second = "num_failed_notifications" if connector == "nixl" else "num_failed_recvs"
        parts.append(counter(f"vllm:{connector}_{second}", [(e0, 1)]))
    if connector == "mooncake":
        store = [
            (f'{e0},operation="get",status="success"', [0, 5, 9, 10]),
            (f'{e0},operation="put",status="error"', [0, 1, 2, 3]),
        ]
        lines = [
            "# HELP vllm:mooncake_store_operation_time_seconds Store op time.",
            "# TYPE vllm:mooncake_store_operation_time_seconds histogram",
        ]
        for labels, counts in store:
            for bound, count in zip(("0.001", "0.01", "0.1", "+Inf"), counts, strict=True):
                lines.append(
                    f'vllm:mooncake_store_operation_time_seconds_bucket{{{labels},le="{bound}"}} {count}'
                )
            lines.append(f"vllm:mooncake_store_operation_time_seconds_count{{{labels}}} {counts[-1]}")
            lines.append(f"vllm:mooncake_store_operation_time_seconds_sum{{{labels}}} 0.05")
        parts.append("\n".join(lines))
    return "\n".join(parts) + "\n"


def sglang_text(*, prompt: float = 3000, generated: float = 900, ttft: list[int] | None = None) -> str:
    labels = f'{MODEL},engine_type="decode",tp_rank="0",pp_rank="0"'
    ttft = ttft or [0, 0, 0, 2, 5, 8, 10, 10, 10, 10, 10, 10, 10]
    return (
        "\n".join(
            [
                gauge("sglang:cache_hit_rate", [(labels, 0.42)]),
                gauge("sglang:num_running_reqs", [(labels, 7)]),
                gauge("sglang:num_queue_reqs", [(labels, 2)]),
                gauge("sglang:token_usage", [(labels, 0.61)]),
                gauge("sglang:gen_throughput", [(labels, 812.5)]),
                gauge("sglang:kv_transfer_speed_gb_s", [(labels, 11.2)]),
                gauge("sglang:kv_transfer_latency_ms", [(labels, 18.0)]),
                gauge("sglang:num_decode_transfer_queue_reqs", [(labels, 1)]),
                counter("sglang:prompt_tokens", [(labels, prompt)]),
                counter("sglang:generation_tokens", [(labels, generated)]),
                counter("sglang:num_transfer_failed_reqs", [(labels, 3)]),
                counter("sglang:num_bootstrap_failed_reqs", [(labels, 1)]),
                histogram("sglang:time_to_first_token_seconds", TTFT_BOUNDS, ttft, 0.5, labels),
                histogram(
                    "sglang:inter_token_latency_seconds",
                    ITL_BOUNDS,
                    [5, 10, 20, 30, 40, 40, 40, 40, 40, 40, 40, 40, 40],
                    1.2,
                    labels,
                ),
                histogram("sglang:e2e_request_latency_seconds", TTFT_BOUNDS, ttft, 8.0, labels),
            ]
        )
        + "\n"
    )


def mindie_text(*, prompt: float = 800, ok: float = 20, failed: float = 1) -> str:
    labels = MODEL
    return (
        "\n".join(
            [
                gauge("num_requests_running", [(labels, 4)]),
                gauge("num_requests_waiting", [(labels, 6)]),
                gauge("npu_cache_usage_perc", [(labels, 0.73)]),
                gauge("npu_prefix_cache_hit_rate", [(labels, 0.35)]),
                counter("prompt_tokens", [(labels, prompt)]),
                counter("generation_tokens", [(labels, 300)]),
                counter("request_success", [(labels, ok)]),
                counter("request_failed", [(labels, failed)]),
                histogram(
                    "time_to_first_token_seconds",
                    TTFT_BOUNDS,
                    [0, 0, 0, 0, 1, 5, 9, 12, 15, 15, 15, 15, 15],
                    1.0,
                    labels,
                ),
            ]
        )
        + "\n"
    )


def mooncake_master_text() -> str:
    return (
        "\n".join(
            [
                gauge("master_allocated_bytes", [("", 3.0e9)]),
                gauge("master_total_capacity_bytes", [("", 12.0e9)]),
                gauge("master_key_count", [("", 1520)]),
                gauge("master_active_clients", [("", 4)]),
                counter("master_successful_evictions", [("", 12)]),
                counter("mem_cache_hit_bytes", [("", 5.5e9)]),
                "# HELP mooncake_transfer_read_bytes Bytes read by the transfer engine.",
                "# TYPE mooncake_transfer_read_bytes counter",
                "mooncake_transfer_read_bytes 7.0e9",
                "# HELP mooncake_transfer_write_bytes Bytes written by the transfer engine.",
                "# TYPE mooncake_transfer_write_bytes counter",
                "mooncake_transfer_write_bytes 6.0e9",
            ]
        )
        + "\n"
    )
