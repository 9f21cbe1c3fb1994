"""The performance model makes load matter the way it does on real hardware."""

from __future__ import annotations

import asyncio
import random
import time

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from sandbox.engine.farm import EngineFarm
from sandbox.engine.testing import PDStack, engine_spec, loopback_base
from sandbox.load.workload import words


async def _metrics(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    """Sample name (with labels folded away) → value; histograms as _sum/_count."""
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                continue
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


async def _stream_ttft(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int = 2) -> float:
    started = time.monotonic()
    body = {"prompt": prompt, "max_tokens": max_tokens, "stream": True}
    async with session.post(f"{url}/v1/completions", json=body) as response:
        assert response.status == 200
        async for line in response.content:
            if line.startswith(b"data: {"):
                return time.monotonic() - started
    raise AssertionError("no token streamed")


async def _stream_all(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int) -> int:
    body = {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
    chunks = 0
    async with session.post(f"{url}/v1/completions", json=body) as response:
        assert response.status == 200
        async for line in response.content:
            chunks += line.startswith(b"data: {")
    return chunks


async def _engine(farm: EngineFarm, role: str = "both", **env: str) -> str:
    spec = engine_spec(role, env={"SANDBOX_TIME_SCALE": "0.5", **env})
    await farm.start("ns/e-0", f"{loopback_base()}.2", spec, {})
    ip, port = farm.address("ns/e-0")
    return f"http://{ip}:{port}"


async def test_repeating_a_long_shared_prefix_raises_the_hit_rate_and_lowers_ttft():
    farm = EngineFarm()
    try:
        url = await _engine(farm)
        prefix = words(random.Random(1), 2048)
        async with aiohttp.ClientSession() as session:
            first = await _stream_ttft(session, url, f"{prefix} first question")
            after_first = await _metrics(session, url)
            later = [await _stream_ttft(session, url, f"{prefix} question number {i}") for i in range(3)]
            after = await _metrics(session, url)
        first_rate = (
            after_first["vllm:prefix_cache_hits_total"] / after_first["vllm:prefix_cache_queries_total"]
        )
        rate = after["vllm:prefix_cache_hits_total"] / after["vllm:prefix_cache_queries_total"]
        assert first_rate == 0.0
        assert rate > 0.7
        assert sorted(later)[1] < first / 3, (first, later)  # the median: one CPU stall must not decide
    finally:
        await farm.close()


async def test_prompt_heavy_load_queues_behind_prefill():
    farm = EngineFarm()
    try:
        url = await _engine(farm, SANDBOX_MAX_NUM_BATCHED_TOKENS="2048")
        rng = random.Random(2)
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(_stream_ttft(session, url, words(rng, 32)) for _ in range(4)))
            light = await _metrics(session, url)
            heavy = [asyncio.create_task(_stream_ttft(session, url, words(rng, 2000))) for _ in range(12)]
            peak_waiting = 0.0
            while not all(task.done() for task in heavy):
                peak_waiting = max(peak_waiting, (await _metrics(session, url))["vllm:num_requests_waiting"])
                await asyncio.sleep(0.03)
            await asyncio.gather(*heavy)
            after = await _metrics(session, url)
        light_queue = (
            light["vllm:request_queue_time_seconds_sum"] / light["vllm:request_queue_time_seconds_count"]
        )
        heavy_queue = (
            after["vllm:request_queue_time_seconds_sum"] - light["vllm:request_queue_time_seconds_sum"]
        ) / 12
        assert peak_waiting >= 5, peak_waiting
        assert heavy_queue > 0.1 > light_queue, (light_queue, heavy_queue)
        light_ttft = light["vllm:time_to_first_token_seconds_sum"] / 4
        heavy_ttft = (
            after["vllm:time_to_first_token_seconds_sum"] - light["vllm:time_to_first_token_seconds_sum"]
        ) / 12
        assert heavy_ttft > 5 * light_ttft
    finally:
        await farm.close()


async def test_generation_heavy_load_fills_the_decode_batch_and_raises_itl():
    farm = EngineFarm()
    try:
        url = await _engine(farm, SANDBOX_DECODE_MS_PER_SEQ="1.0")
        async with aiohttp.ClientSession() as session:
            assert await _stream_all(session, url, "alone in the batch", 40) == 40
            single = await _metrics(session, url)
            full = [_stream_all(session, url, f"busy {i}", 40) for i in range(60)]
            assert await asyncio.gather(*full) == [40] * 60
            after = await _metrics(session, url)
        single_itl = (
            single["vllm:inter_token_latency_seconds_sum"] / single["vllm:inter_token_latency_seconds_count"]
        )
        busy_sum = (
            after["vllm:inter_token_latency_seconds_sum"] - single["vllm:inter_token_latency_seconds_sum"]
        )
        busy_count = (
            after["vllm:inter_token_latency_seconds_count"] - single["vllm:inter_token_latency_seconds_count"]
        )
        assert busy_count == 60 * 39
        assert busy_sum / busy_count > 2.5 * single_itl, (single_itl, busy_sum / busy_count)
    finally:
        await farm.close()


async def test_a_link_fault_raises_failed_transfers_while_both_pods_stay_healthy():
    env = {"SANDBOX_TIME_SCALE": "0.2", "SANDBOX_KV_TIMEOUT_MS": "300"}
    async with PDStack(env=env) as stack:
        decode, prefill = stack.url("decode-0-0"), stack.url("prefill-0-0")
        async with aiohttp.ClientSession() as session:
            body = {"model": "sim-model", "prompt": "silent break " * 200, "max_tokens": 4}
            async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
                assert response.status == 200
            before = await _metrics(session, decode)
            fault = {"kind": "link_down", "peer": "prefill-0-0"}
            async with session.post(f"{decode}/sandbox/faults", json=fault) as response:
                assert response.status == 201
            for _ in range(3):
                async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
                    assert response.status == 200  # recomputed on the decode side: the break is silent
            after = await _metrics(session, decode)
            for url in (decode, prefill):
                async with session.get(f"{url}/health") as response:
                    assert response.status == 200
            async with session.get(f"{decode}/sandbox/kv/links") as response:
                table = await response.json()
        assert stack.farm.is_healthy("sim/decode-0-0") and stack.farm.is_healthy("sim/prefill-0-0")
        failed = "vllm:nixl_num_failed_transfers_total"
        assert before[failed] == 0
        assert after[failed] == 3
        assert after["vllm:nixl_xfer_time_seconds_count"] == before["vllm:nixl_xfer_time_seconds_count"] == 1
        [link] = table["links"]
        assert link["peer"] == "prefill-0-0"
        assert link["status"] == "LLM_WAIT_PROCESS_TIMEOUT"
        assert (link["transfers"], link["failures"]) == (1, 3)


async def test_a_full_kv_cache_preempts_and_recomputes_yet_every_request_completes():
    farm = EngineFarm()
    try:
        url = await _engine(farm, SANDBOX_TIME_SCALE="0.05", SANDBOX_NUM_GPU_BLOCKS="64")  # 1024 tokens of KV
        rng = random.Random(3)
        async with aiohttp.ClientSession() as session:
            prompts = [words(rng, 100) for _ in range(8)]
            chunks = await asyncio.gather(*(_stream_all(session, url, prompt, 120) for prompt in prompts))
            after = await _metrics(session, url)
        assert chunks == [120] * 8
        assert after["vllm:num_preemptions_total"] >= 1
        assert after["vllm:kv_cache_usage_perc"] == 0.0
        assert after["vllm:request_success_total"] == 8
    finally:
        await farm.close()


async def test_a_wrong_pd_ratio_shows_on_the_side_that_is_short():
    env = {"SANDBOX_TIME_SCALE": "0.5", "SANDBOX_DECODE_MS_PER_SEQ": "1.0"}
    async with PDStack(env=env) as stack, aiohttp.ClientSession() as session:
        prefill, decode = stack.url("prefill-0-0"), stack.url("decode-0-0")
        rng = random.Random(4)

        async def ask(prompt: str, max_tokens: int) -> None:
            body = {
                "model": "sim-model",
                "prompt": prompt,
                "max_tokens": max_tokens,
                "ignore_eos": True,
                "stream": True,
            }
            async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
                assert response.status == 200
                async for _ in response.content:
                    pass

        await ask("warm up", 20)
        base = await _metrics(session, decode)
        single_itl = (
            base["vllm:inter_token_latency_seconds_sum"] / base["vllm:inter_token_latency_seconds_count"]
        )

        # Prompt-heavy: long prompts, one token each — prefill queues, decode is idle.
        heavy = [asyncio.create_task(ask(words(rng, 2000), 2)) for _ in range(10)]
        peak = {"prefill": 0.0, "decode": 0.0}
        while not all(task.done() for task in heavy):
            for role, url in (("prefill", prefill), ("decode", decode)):
                peak[role] = max(peak[role], (await _metrics(session, url))["vllm:num_requests_waiting"])
            await asyncio.sleep(0.03)
        await asyncio.gather(*heavy)
        assert peak["prefill"] >= 4 > peak["decode"], peak

        # Generation-heavy: short prompts, long answers — the decode batch fills and ITL rises.
        before = await _metrics(session, decode)
        await asyncio.gather(*(ask(f"short {i}", 40) for i in range(48)))
        after = await _metrics(session, decode)
        count = (
            after["vllm:inter_token_latency_seconds_count"] - before["vllm:inter_token_latency_seconds_count"]
        )
        busy_itl = (
            after["vllm:inter_token_latency_seconds_sum"] - before["vllm:inter_token_latency_seconds_sum"]
        ) / count
        assert busy_itl > 2.5 * single_itl, (single_itl, busy_itl)
        prefill_after = await _metrics(session, prefill)
        assert prefill_after["vllm:inter_token_latency_seconds_count"] == 0  # prefill never decodes
