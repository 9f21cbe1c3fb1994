"""The P/D router: prefill then decode of the same group, prefix affinity, retries, timeouts, errors."""

from __future__ import annotations

import json

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from perfmodel.model.routing import AffinityTable, choose
from sandbox.engine.testing import PDStack

FAST = {"SANDBOX_TIME_SCALE": "0.05"}


async def _router_metrics(session: aiohttp.ClientSession, url: str) -> list:
    async with session.get(f"{url}/metrics") as response:
        return [s for f in text_string_to_metric_families(await response.text()) for s in f.samples]


async def _links(session: aiohttp.ClientSession, url: str) -> dict[str, int]:
    async with session.get(f"{url}/sandbox/kv/links") as response:
        return {link["peer"]: link["transfers"] for link in (await response.json())["links"]}


def _chat(content: str, **extra) -> dict:
    return {
        "model": "sim-model",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 3,
        **extra,
    }


async def test_requests_go_prefill_then_decode_of_the_same_group():
    async with PDStack(groups=2, prefill=2, decode=1, env=FAST) as stack, aiohttp.ClientSession() as session:
        for i in range(16):
            async with session.post(
                f"{stack.router_url}/v1/chat/completions", json=_chat(f"question {i} " * 40)
            ) as r:
                assert r.status == 200
                assert (await r.json())["usage"]["completion_tokens"] == 3
        for group in (0, 1):
            pulls = await _links(session, stack.url(f"decode-{group}-0"))
            assert pulls, f"decode-{group}-0 pulled nothing"
            assert all(peer.startswith(f"prefill-{group}-") for peer in pulls), pulls
        total = sum([sum((await _links(session, stack.url(f"decode-{g}-0"))).values()) for g in (0, 1)])
        assert total == 16


async def test_a_shared_prefix_sticks_to_one_prefill_pod():
    async with PDStack(groups=1, prefill=3, decode=1, env=FAST) as stack, aiohttp.ClientSession() as session:
        prefix = "system prompt shared by every request of this tenant " * 30
        for i in range(9):
            async with session.post(
                f"{stack.router_url}/v1/chat/completions", json=_chat(f"{prefix} q{i}")
            ) as r:
                assert r.status == 200
        pulls = await _links(session, stack.url("decode-0-0"))
        assert list(pulls.values()) == [9], pulls  # every request's KV came from the same prefill pod
        samples = await _router_metrics(session, stack.router_url)
        ratio = {
            s.name.rsplit("_", 1)[-1] + s.labels.get("le", ""): s.value
            for s in samples
            if s.name.startswith("kthena_router_prefix_cache_match_ratio")
        }
        assert (ratio["count"], ratio["bucket0.0"]) == (9.0, 1.0)  # one miss (ratio 0), then eight hits


def test_least_loaded_prefill_when_no_prefix_matches_and_decode_only_from_its_group():
    choice = choose(
        prefills=[("p-a", "g0"), ("p-b", "g1")],
        decodes=[("d-a", "g0"), ("d-b", "g1"), ("d-c", "g1")],
        boths=[],
        hashes=[1, 2],
        affinity=AffinityTable(),
        inflight={"p-a": 3, "p-b": 1, "d-b": 2, "d-c": 0},
        exclude=set(),
    )
    assert (choice.prefill, choice.decode, choice.affinity_hit) == ("p-b", "d-c", False)
    none_left = choose([("p-a", "g0")], [("d-b", "g1")], [], [], AffinityTable(), {}, set())
    assert none_left is None  # a prefill pod whose group has no decode pod is never chosen


async def test_a_failing_prefill_pod_is_retried_on_another():
    async with PDStack(prefill=2, env=FAST, retry_attempts=2) as stack, aiohttp.ClientSession() as session:
        async with session.post(f"{stack.url('prefill-0-0')}/sandbox/faults", json={"kind": "http_5xx"}) as r:
            assert r.status == 201
        for i in range(6):
            async with session.post(
                f"{stack.router_url}/v1/chat/completions", json=_chat(f"retry {i} " * 20)
            ) as r:
                assert r.status == 200
        log = list(stack.routers.router("sim/router").stats.log_lines)
        failed = [
            line for line in log if "proxy failed for prefill pod prefill-0-0, decode pod decode-0-0" in line
        ]
        assert failed and failed[0].startswith("E") and "router.go:" in failed[0], log[-5:]
        assert any("kv connector run successful for prefill pod prefill-0-1" in line for line in log)
        assert set(await _links(session, stack.url("decode-0-0"))) == {"prefill-0-1"}


async def test_retries_exhausted_answers_502_with_the_reason():
    async with PDStack(prefill=1, env=FAST, retry_attempts=1) as stack, aiohttp.ClientSession() as session:
        await session.post(f"{stack.url('prefill-0-0')}/sandbox/faults", json={"kind": "non_json"})
        async with session.post(f"{stack.router_url}/v1/chat/completions", json=_chat("doomed")) as r:
            assert r.status == 502
            error = (await r.json())["error"]
        assert error["type"] == "prefill_error"
        assert "non-JSON" in error["message"]


async def test_the_route_timeout_answers_504():
    async with PDStack(env=FAST, timeout_seconds=0.3) as stack, aiohttp.ClientSession() as session:
        await session.post(
            f"{stack.url('prefill-0-0')}/sandbox/faults", json={"kind": "slow", "delay_ms": 2000}
        )
        async with session.post(f"{stack.router_url}/v1/chat/completions", json=_chat("slow")) as r:
            assert r.status == 504
            assert (await r.json())["error"]["type"] == "timeout"
        samples = await _router_metrics(session, stack.router_url)
        errors = {s.labels["error_type"] for s in samples if s.name == "kthena_router_requests_total"}
        assert "timeout" in errors


async def test_client_errors_pass_through_and_unknown_models_are_404():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        async with session.post(
            f"{stack.router_url}/v1/chat/completions", json={**_chat("x"), "model": "nope"}
        ) as r:
            assert r.status == 404
        await session.post(f"{stack.url('decode-0-0')}/sandbox/faults", json={"kind": "http_429", "count": 1})
        async with session.post(f"{stack.router_url}/v1/chat/completions", json=_chat("x")) as r:
            assert r.status == 429
            assert r.headers["Retry-After"] == "1"
        await session.post(f"{stack.url('decode-0-0')}/sandbox/faults", json={"kind": "http_401"})
        async with session.post(f"{stack.router_url}/v1/chat/completions", json=_chat("x")) as r:
            assert r.status == 401
            assert await r.json() == {"error": "Unauthorized"}


async def test_no_ready_pods_is_503_no_endpoints():
    async with PDStack(env=FAST, retry_attempts=0) as stack, aiohttp.ClientSession() as session:
        await stack.farm.stop("sim/decode-0-0", 0)
        async with session.post(f"{stack.router_url}/v1/chat/completions", json=_chat("alone")) as r:
            assert r.status == 503
            assert (await r.json())["error"]["type"] == "no_endpoints"


async def test_streaming_through_the_router():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        body = _chat("stream through", stream=True, stream_options={"include_usage": True}, max_tokens=5)
        async with session.post(f"{stack.router_url}/v1/chat/completions", json=body) as r:
            assert r.status == 200
            events = [line.strip() async for line in r.content if line.startswith(b"data:")]
        assert events[-1] == b"data: [DONE]"
        chunks = [json.loads(e[5:]) for e in events[:-1]]
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}  # as vLLM opens
        assert sum(1 for c in chunks if c["choices"]) == 1 + 5
        assert chunks[-1]["usage"]["completion_tokens"] == 5
        async with session.get(f"{stack.router_url}/v1/models") as r:
            assert (await r.json())["data"][0]["id"] == "sim-model"
