"""The engine farm's lifecycle (start, drain, stop, logs) and each engine's OpenAI-compatible API."""

from __future__ import annotations

import asyncio
import json
import socket

import aiohttp
import pytest

from sandbox.engine.farm import EngineFarm
from sandbox.engine.lengths import natural_length
from sandbox.engine.spec import EngineArgumentError, EngineSpec
from sandbox.engine.testing import PDStack, engine_spec, loopback_base
from sandbox.engine.tokens import chat_prompt


@pytest.fixture
async def engine():
    farm = EngineFarm()
    await farm.start(
        "ns/e-0", f"{loopback_base()}.2", engine_spec("both", env={"SANDBOX_TIME_SCALE": "0.05"}), {}
    )
    ip, port = farm.address("ns/e-0")
    yield farm, f"http://{ip}:{port}"
    await farm.close()


async def test_models_lists_the_served_model(engine):
    _, url = engine
    async with aiohttp.ClientSession() as session, session.get(f"{url}/v1/models") as response:
        body = await response.json()
    assert [m["id"] for m in body["data"]] == ["sim-model"]
    assert body["data"][0]["max_model_len"] == 8192


async def test_chat_completion_with_usage(engine):
    _, url = engine
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "count these words"}],
        "max_tokens": 5,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/v1/chat/completions", json=body) as response,
    ):
        answer = await response.json()
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["choices"][0]["message"]["content"]
    assert answer["choices"][0]["finish_reason"] == "length"
    usage = answer["usage"]
    assert usage["completion_tokens"] == 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + 5


async def test_streaming_completion_sends_one_chunk_per_token_usage_and_done(engine):
    _, url = engine
    body = {"prompt": "stream me", "max_tokens": 4, "stream": True, "stream_options": {"include_usage": True}}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/v1/completions", json=body) as response,
    ):
        assert response.headers["Content-Type"].startswith("text/event-stream")
        events = [line.strip() async for line in response.content if line.startswith(b"data:")]
    assert events[-1] == b"data: [DONE]"
    chunks = [json.loads(e[5:]) for e in events[:-1]]
    tokens = [c for c in chunks if c["choices"]]
    assert len(tokens) == 4
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None, None, None, "length"]
    assert chunks[-1]["usage"]["completion_tokens"] == 4


async def test_chat_without_max_tokens_stops_on_its_own(engine):
    _, url = engine
    body = {"messages": [{"role": "user", "content": "say something"}]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/v1/chat/completions", json=body) as response,
    ):
        answer = await response.json()
    assert answer["choices"][0]["finish_reason"] == "stop"
    prompt = chat_prompt(body["messages"])
    assert answer["usage"]["completion_tokens"] == natural_length(prompt) > 1  # at its end-of-sequence


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"model": "gpt-4", "prompt": "x"}, 404, "The model `gpt-4` does not exist."),
        ({"prompt": "x " * 8200, "max_tokens": 10}, 400, "maximum context length is 8192 tokens"),
        ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens must be at least 1"),
        ({"max_tokens": 3}, 400, "prompt: Field required"),
    ],
)
async def test_bad_requests_get_openai_error_bodies(engine, body, status, needle):
    _, url = engine
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/v1/completions", json=body) as response,
    ):
        assert response.status == status
        error = (await response.json())["error"]
    assert needle in error["message"]
    assert error["code"] == status


async def _until_in_flight(farm: EngineFarm) -> None:
    for _ in range(500):
        engine = farm.engine("ns/e-0")
        if engine is not None and engine.inflight:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the request never reached the engine")


async def test_stop_drains_in_flight_requests_and_refuses_new_connections():
    farm = EngineFarm()
    spec = engine_spec("both", env={"SANDBOX_TIME_SCALE": "1", "SANDBOX_DECODE_STEP_MS": "10"})
    await farm.start("ns/e-0", f"{loopback_base()}.2", spec, {})
    ip, port = farm.address("ns/e-0")
    url = f"http://{ip}:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            request = asyncio.create_task(
                session.post(f"{url}/v1/completions", json={"prompt": "x", "max_tokens": 20})
            )
            await _until_in_flight(farm)
            await farm.stop("ns/e-0", grace_seconds=5)
            response = await request
            assert response.status == 200
            assert (await response.json())["usage"]["completion_tokens"] == 20
        async with aiohttp.ClientSession() as fresh:
            with pytest.raises(aiohttp.ClientConnectionError):
                await fresh.get(f"{url}/health")
        assert not farm.is_healthy("ns/e-0")
        assert any("draining" in line for line in farm.logs("ns/e-0"))
    finally:
        await farm.close()


async def test_stop_aborts_what_is_left_when_the_grace_period_ends():
    farm = EngineFarm()
    spec = engine_spec("both", env={"SANDBOX_TIME_SCALE": "1", "SANDBOX_DECODE_STEP_MS": "50"})
    await farm.start("ns/e-0", f"{loopback_base()}.2", spec, {})
    ip, port = farm.address("ns/e-0")
    try:
        async with aiohttp.ClientSession() as session:
            body = {"prompt": "x", "max_tokens": 500}
            request = asyncio.create_task(session.post(f"http://{ip}:{port}/v1/completions", json=body))
            await _until_in_flight(farm)
            await farm.stop("ns/e-0", grace_seconds=0.2)
            response = await request
            assert response.status == 500
            assert "shutting down" in (await response.json())["error"]["message"]
    finally:
        await farm.close()


async def test_an_engine_refusing_its_configuration_raises_and_leaves_the_reason_in_its_log():
    farm = EngineFarm()
    bad = EngineSpec("vllm", "both", "m", 0, None, None, ("m",), (("SANDBOX_TIME_SCALE", "fast"),))
    try:
        with pytest.raises(EngineArgumentError):
            await farm.start("ns/bad-0", f"{loopback_base()}.2", bad, {})
        assert farm.logs("ns/bad-0") == ["ValueError: SANDBOX_TIME_SCALE='fast' is not a number"]
        assert not farm.is_healthy("ns/bad-0")
    finally:
        await farm.close()


async def test_a_taken_address_fails_to_bind_like_uvicorn():
    base = loopback_base()
    with socket.socket() as taken:
        taken.bind((f"{base}.2", 0))
        taken.listen()
        port = taken.getsockname()[1]
        farm = EngineFarm()
        try:
            with pytest.raises(OSError):
                await farm.start("ns/e-0", f"{base}.2", engine_spec("both", port=port), {})
            assert "error while attempting to bind on address" in farm.logs("ns/e-0")[-1]
        finally:
            await farm.close()


async def test_engines_share_a_port_on_their_own_pod_addresses():
    farm = EngineFarm()
    base = loopback_base()
    with socket.socket() as probe:
        probe.bind((f"{base}.2", 0))
        port = probe.getsockname()[1]
    try:
        for n in range(2, 5):
            await farm.start(f"ns/e-{n}", f"{base}.{n}", engine_spec("both", port=port), {})
        assert {farm.address(f"ns/e-{n}") for n in range(2, 5)} == {
            (f"{base}.{n}", port) for n in range(2, 5)
        }
        async with aiohttp.ClientSession() as session:
            for n in range(2, 5):
                async with session.get(f"http://{base}.{n}:{port}/sandbox/info") as response:
                    assert (await response.json())["pod"] == f"ns/e-{n}"
    finally:
        await farm.close()


async def test_an_api_key_guards_the_openai_routes_and_the_router_relays_credentials():
    async with PDStack(
        args=("sim-model", "--api-key", "sk-engine"), env={"SANDBOX_TIME_SCALE": "0.05"}
    ) as stack:
        body = {"model": "sim-model", "prompt": "secret", "max_tokens": 2}
        good = {"Authorization": "Bearer sk-engine"}
        async with aiohttp.ClientSession() as session:
            decode = stack.url("decode-0-0")
            async with session.post(f"{decode}/v1/completions", json=body) as response:
                assert response.status == 401
                assert await response.json() == {"error": "Unauthorized"}
            async with session.get(
                f"{decode}/v1/models", headers={"Authorization": "Bearer  sk-engine"}
            ) as response:
                assert response.status == 401  # stray whitespace is a different key
            async with session.get(f"{decode}/health") as response:
                assert response.status == 200
            async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
                assert response.status == 401
            async with session.post(
                f"{stack.router_url}/v1/completions", json=body, headers=good
            ) as response:
                assert response.status == 200


async def test_version_and_the_periodic_stats_line(engine):
    farm, url = engine
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/version") as response:
            assert (await response.json())["version"]
        async with session.post(
            f"{url}/v1/completions", json={"prompt": "log me", "max_tokens": 3}
        ) as response:
            assert response.status == 200
    farm.engine("ns/e-0").maybe_log_stats(every=0)
    assert "Avg generation throughput" in farm.logs("ns/e-0")[-1]
