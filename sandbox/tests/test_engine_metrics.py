"""Every metric family of metrics.md, per engine kind, parses with its type and labels."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from sandbox.engine.farm import EngineFarm
from sandbox.engine.testing import engine_spec, loopback_base

VLLM = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:external_prefix_cache_queries": "counter",
    "vllm:external_prefix_cache_hits": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:cache_config_info": "gauge",
}
NIXL = {
    "vllm:nixl_xfer_time_seconds": "histogram",
    "vllm:nixl_bytes_transferred": "histogram",
    "vllm:nixl_num_failed_transfers": "counter",
    "vllm:nixl_num_failed_notifications": "counter",
}
MOONCAKE = {
    "vllm:mooncake_xfer_time_seconds": "histogram",
    "vllm:mooncake_bytes_transferred": "histogram",
    "vllm:mooncake_num_failed_transfers": "counter",
    "vllm:mooncake_num_failed_recvs": "counter",
    "vllm:mooncake_store_operation_time_seconds": "histogram",
}
SGLANG = {
    "sglang:cache_hit_rate": "gauge",
    "sglang:time_to_first_token_seconds": "histogram",
    "sglang:inter_token_latency_seconds": "histogram",
    "sglang:e2e_request_latency_seconds": "histogram",
    "sglang:num_running_reqs": "gauge",
    "sglang:num_queue_reqs": "gauge",
    "sglang:token_usage": "gauge",
    "sglang:gen_throughput": "gauge",
    "sglang:prompt_tokens": "counter",
    "sglang:generation_tokens": "counter",
    "sglang:kv_transfer_speed_gb_s": "gauge",
    "sglang:kv_transfer_latency_ms": "gauge",
    "sglang:num_decode_transfer_queue_reqs": "gauge",
    "sglang:num_transfer_failed_reqs": "counter",
    "sglang:num_bootstrap_failed_reqs": "counter",
}
MINDIE = {
    "num_requests_running": "gauge",
    "num_requests_waiting": "gauge",
    "npu_cache_usage_perc": "gauge",
    "npu_prefix_cache_hit_rate": "gauge",
    "prompt_tokens": "counter",
    "generation_tokens": "counter",
    "request_success": "counter",
    "request_failed": "counter",
    "time_to_first_token_seconds": "histogram",
}


async def _scrape(spec, body: dict | None = None) -> dict:
    farm = EngineFarm()
    base = loopback_base()
    try:
        await farm.start("ns/e-0", f"{base}.2", spec, {})
        address = farm.address("ns/e-0")
        assert address is not None
        ip, port = address
        async with aiohttp.ClientSession() as session:
            if body is not None:
                async with session.post(f"http://{ip}:{port}/v1/completions", json=body) as response:
                    assert response.status == 200, await response.text()
            async with session.get(f"http://{ip}:{port}/metrics") as response:
                assert response.status == 200
                text = await response.text()
    finally:
        await farm.close()
    return {family.name: family for family in text_string_to_metric_families(text)}


def _check(families: dict, expected: dict[str, str], labels: set[str]) -> None:
    for name, kind in expected.items():
        assert name in families, f"{name} missing"
        family = families[name]
        assert family.type == kind, f"{name} is {family.type}, expected {kind}"
        assert family.samples, f"{name} has no samples"
        # vLLM 0.32's cache_config_info carries the engine's settings and no model_name
        required = labels - {"model_name"} if name == "vllm:cache_config_info" else labels
        for sample in family.samples:
            assert required <= set(sample.labels), f"{name} sample {sample.labels} lacks {required}"
        if kind == "histogram":
            suffixes = {s.name.removeprefix(name) for s in family.samples}
            assert suffixes == {"_bucket", "_count", "_sum"}
            assert any(s.labels.get("le") == "+Inf" for s in family.samples)


ENV = {"SANDBOX_TIME_SCALE": "0.05"}
REQUEST = {"prompt": "metrics " * 64, "max_tokens": 3}


async def test_vllm_nixl_engine_exposes_every_vllm_and_nixl_family():
    families = await _scrape(engine_spec("decode", env=ENV), REQUEST)
    _check(families, VLLM | NIXL, {"model_name", "engine"})
    assert not any(name.startswith("vllm:mooncake") for name in families)
    reasons = {s.labels["finished_reason"] for s in families["vllm:request_success"].samples}
    assert reasons == {"stop", "length", "abort", "error", "repetition"}  # vLLM 0.32's five
    info = families["vllm:cache_config_info"].samples[0].labels
    assert info["block_size"] == "16"


async def test_vllm_mooncake_store_engine_exposes_mooncake_families_with_store_operation_labels():
    spec = engine_spec("both", kv_connector="MooncakeStoreConnector", mooncake_master="mc:50051", env=ENV)
    families = await _scrape(spec, REQUEST)
    _check(families, VLLM | MOONCAKE, {"model_name", "engine"})
    ops = {
        (s.labels["operation"], s.labels["status"])
        for s in families["vllm:mooncake_store_operation_time_seconds"].samples
    }
    assert ("put", "success") in ops
    assert not any(name.startswith("vllm:nixl") for name in families)


async def test_sglang_engine_uses_sglang_names_and_engine_type_label():
    families = await _scrape(engine_spec("prefill", engine="sglang", env=ENV), REQUEST)
    _check(families, SGLANG, {"model_name", "engine_type", "tp_rank"})
    assert {s.labels["engine_type"] for s in families["sglang:num_running_reqs"].samples} == {"prefill"}
    assert not any(name.startswith("vllm:") for name in families)


async def test_mindie_engine_uses_unprefixed_names_when_monitoring_is_on():
    families = await _scrape(engine_spec("both", engine="mindie", env=ENV), REQUEST)
    _check(families, MINDIE, {"model_name"})
    assert families["request_success"].samples[0].value == 1.0


async def test_mindie_without_monitor_mode_answers_metrics_with_its_error():
    spec = engine_spec("both", engine="mindie", env=ENV)
    spec = type(spec)(**{**spec.__dict__, "env": (("SANDBOX_TIME_SCALE", "0.05"),)})
    farm = EngineFarm()
    try:
        await farm.start("ns/m-0", f"{loopback_base()}.2", spec, {})
        address = farm.address("ns/m-0")
        assert address is not None
        ip, port = address
        async with aiohttp.ClientSession() as session, session.get(f"http://{ip}:{port}/metrics") as response:
            # as MindIE-LLM's GetPrometheusMetrics answers (docs/ascend.md)
            assert response.status == 500
            assert await response.json() == {
                "error": "Environment variable MIES_SERVICE_MONITOR_MODE is not set.",
                "error_type": "Incomplete Generation",
            }
        assert any("MIES_SERVICE_MONITOR_MODE=1" in line for line in farm.logs("ns/m-0"))
    finally:
        await farm.close()
