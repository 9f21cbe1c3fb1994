"""KV links with LLM-DataDist semantics, and switching an instance's role in place."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from sandbox.engine.farm import EngineFarm
from sandbox.engine.testing import PDStack, engine_spec, loopback_base

FAST = {"SANDBOX_TIME_SCALE": "0.1", "SANDBOX_KV_TIMEOUT_MS": "200"}


async def _call(
    session: aiohttp.ClientSession, method: str, url: str, body: dict | None = None
) -> tuple[int, dict]:
    async with session.request(method, url, json=body) as response:
        return response.status, await response.json()


async def test_decode_links_to_prefill_and_both_sides_record_it():
    async with PDStack(prefill=2, env=FAST) as stack, aiohttp.ClientSession() as session:
        decode = stack.url("decode-0-0")
        status, answer = await _call(
            session, "POST", f"{decode}/sandbox/kv/links", {"peers": ["prefill-0-0", "prefill-0-1"]}
        )
        assert status == 200
        assert answer["ret"] == "LLM_SUCCESS"
        assert [r["status"] for r in answer["results"]] == ["LLM_SUCCESS", "LLM_SUCCESS"]
        _, again = await _call(session, "POST", f"{decode}/sandbox/kv/links", {"peers": ["prefill-0-0"]})
        assert again["results"][0]["status"] == "LLM_EXIST_LINK"
        _, table = await _call(session, "GET", f"{decode}/sandbox/kv/links")
        assert table["role"] == "decode"
        assert {
            (link["peer"], link["direction"], link["status"], link["state"]) for link in table["links"]
        } == {
            ("prefill-0-0", "pull", "LLM_SUCCESS", "linked"),
            ("prefill-0-1", "pull", "LLM_SUCCESS", "linked"),
        }
        _, served = await _call(session, "GET", f"{stack.url('prefill-0-0')}/sandbox/kv/links")
        assert [(link["peer"], link["direction"]) for link in served["links"]] == [("decode-0-0", "serve")]


async def test_only_the_decode_side_opens_links_and_unknown_peers_fail():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        status, answer = await _call(
            session, "POST", f"{stack.url('prefill-0-0')}/sandbox/kv/links", {"peers": ["decode-0-0"]}
        )
        assert (status, answer["ret"]) == (409, "LLM_FEATURE_NOT_ENABLED")
        _, answer = await _call(
            session, "POST", f"{stack.url('decode-0-0')}/sandbox/kv/links", {"peers": ["prefill-9-9"]}
        )
        assert answer["ret"] == "LLM_LINK_FAILED"
        assert answer["results"][0]["status"] == "LLM_LINK_FAILED"
        status, answer = await _call(
            session, "POST", f"{stack.url('decode-0-0')}/sandbox/kv/links", {"peers": []}
        )
        assert status == 400
        assert answer["error"]["field"] == "peers"


async def test_unlink_and_unlinking_twice_says_not_yet_linked():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        decode = stack.url("decode-0-0")
        await _call(session, "POST", f"{decode}/sandbox/kv/links", {"peers": ["prefill-0-0"]})
        status, answer = await _call(session, "DELETE", f"{decode}/sandbox/kv/links/prefill-0-0")
        assert (status, answer["ret"]) == (200, "LLM_SUCCESS")
        status, answer = await _call(session, "DELETE", f"{decode}/sandbox/kv/links/prefill-0-0")
        assert (status, answer["ret"]) == (404, "LLM_NOT_YET_LINK")
        _, served = await _call(session, "GET", f"{stack.url('prefill-0-0')}/sandbox/kv/links")
        assert served["links"] == []


async def test_switch_role_is_refused_with_exist_link_then_succeeds_after_unlinking():
    async with PDStack(engine="sglang", env=FAST) as stack, aiohttp.ClientSession() as session:
        decode, prefill = stack.url("decode-0-0"), stack.url("prefill-0-0")
        await _call(session, "POST", f"{decode}/sandbox/kv/links", {"peers": ["prefill-0-0"]})
        status, answer = await _call(session, "POST", f"{prefill}/kv/switch_role", {"role": "decode"})
        assert (status, answer["ret"], answer["links"]) == (409, "LLM_EXIST_LINK", ["decode-0-0"])
        status, answer = await _call(session, "POST", f"{decode}/kv/switch_role", {"role": "prefill"})
        assert (status, answer["ret"]) == (409, "LLM_EXIST_LINK")
        await _call(session, "DELETE", f"{decode}/sandbox/kv/links/prefill-0-0")
        status, answer = await _call(session, "POST", f"{prefill}/kv/switch_role", {"role": "decode"})
        assert (status, answer) == (200, {"ret": "LLM_SUCCESS", "role": "decode", "previous_role": "prefill"})
        assert stack.farm.role("sim/prefill-0-0") == "decode"
        async with session.get(f"{prefill}/metrics") as response:
            families = {f.name: f for f in text_string_to_metric_families(await response.text())}
        assert {s.labels["engine_type"] for s in families["sglang:num_running_reqs"].samples} == {"decode"}
        _, table = await _call(session, "GET", f"{prefill}/sandbox/kv/links")
        assert table["role"] == "decode"
        status, answer = await _call(session, "POST", f"{prefill}/kv/switch_role", {"role": "router"})
        assert status == 400
        assert answer["error"]["field"] == "role"


async def test_link_down_shows_on_the_link_table_without_traffic_and_recovers_after_relinking():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        decode, prefill = stack.url("decode-0-0"), stack.url("prefill-0-0")
        await _call(session, "POST", f"{decode}/sandbox/kv/links", {"peers": ["prefill-0-0"]})
        status, _ = await _call(
            session, "POST", f"{prefill}/sandbox/faults", {"kind": "link_down", "peer": "decode-0-0"}
        )
        assert status == 201
        _, table = await _call(session, "GET", f"{decode}/sandbox/kv/links")
        assert table["links"][0]["status"] == "LLM_WAIT_PROCESS_TIMEOUT"
        assert table["links"][0]["state"] == "broken"
        _, answer = await _call(
            session, "POST", f"{decode}/sandbox/kv/links", {"peers": ["prefill-0-0"], "timeout_ms": 100}
        )
        assert answer["results"][0]["status"] == "LLM_LINK_FAILED"
        await _call(session, "DELETE", f"{prefill}/sandbox/faults")
        _, answer = await _call(session, "POST", f"{decode}/sandbox/kv/links", {"peers": ["prefill-0-0"]})
        assert answer["results"][0]["status"] == "LLM_SUCCESS"
        _, table = await _call(session, "GET", f"{decode}/sandbox/kv/links")
        assert table["links"][0]["status"] == "LLM_SUCCESS"


async def test_pulling_kv_the_prefill_no_longer_holds_is_kv_cache_not_exist():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        prefill, decode = stack.url("prefill-0-0"), stack.url("decode-0-0")
        body = {"prompt": "pull me " * 100, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
        status, first = await _call(session, "POST", f"{prefill}/v1/completions", body)
        assert status == 200
        params = first["kv_transfer_params"]
        assert params["remote_engine_id"] == "prefill-0-0"
        decode_body = {"prompt": "pull me " * 100, "max_tokens": 3, "kv_transfer_params": params}
        status, _ = await _call(session, "POST", f"{decode}/v1/completions", decode_body)
        assert status == 200
        status, _ = await _call(session, "POST", f"{decode}/v1/completions", decode_body)
        assert status == 200  # recomputed
        _, table = await _call(session, "GET", f"{decode}/sandbox/kv/links")
        [link] = table["links"]
        assert (link["transfers"], link["failures"], link["status"]) == (1, 1, "LLM_KV_CACHE_NOT_EXIST")
        assert link["bytes"] > 0
        assert "no KV cache" in link["last_error"]


async def test_a_slow_link_stretches_transfers_but_keeps_the_link_up():
    env = {"SANDBOX_TIME_SCALE": "1", "SANDBOX_KV_LATENCY_MS": "5"}
    async with PDStack(env=env) as stack, aiohttp.ClientSession() as session:
        decode = stack.url("decode-0-0")
        body = {"model": "sim-model", "prompt": "slow link " * 50, "max_tokens": 2}
        async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
            assert response.status == 200
        _, table = await _call(session, "GET", f"{decode}/sandbox/kv/links")
        fast = table["links"][0]["xfer_seconds_max"]
        fault = {"kind": "link_slow", "peer": "prefill-0-0", "factor": 4, "delay_ms": 100}
        await _call(session, "POST", f"{decode}/sandbox/faults", fault)
        async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
            assert response.status == 200
        _, table = await _call(session, "GET", f"{decode}/sandbox/kv/links")
        [link] = table["links"]
        assert link["status"] == "LLM_SUCCESS"
        assert (link["transfers"], link["failures"]) == (2, 0)
        assert link["xfer_seconds_max"] >= 0.1 > fast


async def test_concurrent_pulls_queue_on_one_link():
    # 2000 tokens x 114688 B at 1 GB/s = 0.23 s per transfer: eight at once take ~1.8 s for the last.
    env = {"SANDBOX_TIME_SCALE": "0.25", "SANDBOX_KV_BANDWIDTH_GBPS": "1"}
    async with PDStack(env=env) as stack, aiohttp.ClientSession() as session:
        body = {"model": "sim-model", "prompt": "kv " * 2000, "max_tokens": 1}

        async def one() -> None:
            async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
                assert response.status == 200

        await one()
        _, table = await _call(session, "GET", f"{stack.url('decode-0-0')}/sandbox/kv/links")
        single = table["links"][0]["xfer_seconds_max"]
        await asyncio.gather(*(one() for _ in range(8)))
        _, table = await _call(session, "GET", f"{stack.url('decode-0-0')}/sandbox/kv/links")
        [link] = table["links"]
        assert link["transfers"] == 9
        assert link["xfer_seconds_max"] > 3 * single


async def test_switching_role_notifies_the_farm():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        changes: list[tuple[str, str]] = []
        stack.farm.on_role_change = lambda pod, role: changes.append((pod, role))
        status, _ = await _call(
            session, "POST", f"{stack.url('prefill-0-0')}/kv/switch_role", {"role": "decode"}
        )
        assert status == 200
        assert changes == [("sim/prefill-0-0", "decode")]


async def test_mindie_fails_requests_over_a_dead_link_instead_of_recomputing():
    env = {"SANDBOX_TIME_SCALE": "0.1", "SANDBOX_KV_TIMEOUT_MS": "200"}
    async with (
        PDStack(engine="mindie", env=env, retry_attempts=0) as stack,
        aiohttp.ClientSession() as session,
    ):
        decode = stack.url("decode-0-0")
        await _call(session, "POST", f"{decode}/sandbox/faults", {"kind": "link_down"})
        body = {"model": "sim-model", "prompt": "datadist " * 64, "max_tokens": 2}
        async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
            assert response.status == 502
            assert (await response.json())["error"]["type"] == "decode_error"
        _, table = await _call(session, "GET", f"{decode}/sandbox/kv/links")
        assert table["kv_connector"] == "llm-datadist"
        assert table["links"][0]["status"] == "LLM_LINK_FAILED"
        assert table["links"][0]["failures"] == 1
        async with session.get(f"{decode}/metrics") as response:
            text = await response.text()
        assert 'request_failed_total{model_name="sim-model"} 1.0' in text


async def test_llm_datadist_needs_a_listen_address_to_become_prefill():
    async with PDStack(engine="mindie", env=FAST) as stack, aiohttp.ClientSession() as session:
        decode = stack.url("decode-0-0")
        status, answer = await _call(session, "POST", f"{decode}/kv/switch_role", {"role": "prefill"})
        assert (status, answer["ret"], answer["error"]["field"]) == (400, "LLM_PARAM_INVALID", "options")
        assert "llm.listenIpInfo" in answer["error"]["message"]
        ip = decode.removeprefix("http://").split(":")[0]
        body = {"role": "prefill", "options": {"llm.listenIpInfo": f"{ip}:26000"}}
        status, answer = await _call(session, "POST", f"{decode}/kv/switch_role", body)
        assert (status, answer["ret"], answer["role"]) == (200, "LLM_SUCCESS", "prefill")


async def test_linking_to_a_prefill_that_is_still_loading_times_out():
    farm, base = EngineFarm(), loopback_base()
    try:
        slow = engine_spec("prefill", env={"SANDBOX_STARTUP_SECONDS": "30", "SANDBOX_KV_TIMEOUT_MS": "50"})
        await farm.start("ns/prefill-0", f"{base}.2", slow, {})
        await farm.start(
            "ns/decode-0", f"{base}.3", engine_spec("decode", env={"SANDBOX_KV_TIMEOUT_MS": "50"}), {}
        )
        assert not farm.is_healthy("ns/prefill-0")
        ip, port = farm.address("ns/decode-0")
        async with aiohttp.ClientSession() as session:
            _, answer = await _call(
                session, "POST", f"http://{ip}:{port}/sandbox/kv/links", {"peers": ["prefill-0"]}
            )
        assert answer["ret"] == "LLM_LINK_FAILED"
        assert answer["results"][0]["status"] == "LLM_WAIT_PROCESS_TIMEOUT"
        assert "not initialised yet" in answer["results"][0]["message"]
    finally:
        await farm.close()
