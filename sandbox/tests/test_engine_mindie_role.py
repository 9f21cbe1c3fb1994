"""MindIE's role assignment on its management API: linking by peer table, LLM_EXIST_LINK on a switch
with open links, the cost of link set-up and of the switch, and 404 on engines that serve no such route."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from sandbox.engine.testing import PDStack

FAST = {"SANDBOX_TIME_SCALE": "0.1", "SANDBOX_KV_TIMEOUT_MS": "200"}


async def _call(session: aiohttp.ClientSession, method: str, url: str, body: dict | None = None):
    async with session.request(method, url, json=body) as response:
        return response.status, await response.json()


def _node(stack: PDStack, pod: str, number: int) -> dict:
    ip = stack.url(pod).removeprefix("http://").split(":")[0]
    return {"id": number, "server_ip": ip, "host_ip": ip, "device": []}


async def _settled(session: aiohttp.ClientSession, url: str) -> dict:
    for _ in range(200):
        _, status = await _call(session, "GET", f"{url}/v1/status")
        if status["service"]["roleStatus"] == "RoleReady":
            return status
        await asyncio.sleep(0.01)
    raise AssertionError(f"{url} never became RoleReady")


async def test_a_decode_links_to_the_prefills_its_peer_table_lists():
    async with PDStack(engine="mindie", prefill=2, env=FAST) as stack, aiohttp.ClientSession() as session:
        decode = stack.url("decode-0-0")
        body = {
            "local": _node(stack, "decode-0-0", 3),
            "peers": [_node(stack, "prefill-0-0", 1), _node(stack, "prefill-0-1", 2)],
        }
        started = time.monotonic()
        status, answer = await _call(session, "POST", f"{decode}/v1/role/decode", body)
        assert (status, answer) == (200, {"result": "ok"})
        settled = await _settled(session, decode)
        # two links at 150 ms each, times the 0.1 time scale
        assert time.monotonic() - started >= 0.03
        assert settled["service"]["currentRole"] == "decode"
        assert settled["linkStatus"]["peers"] == [{"target": 1, "link": "ok"}, {"target": 2, "link": "ok"}]
        _, table = await _call(session, "GET", f"{stack.url('prefill-0-0')}/sandbox/kv/links")
        assert [(link["peer"], link["direction"]) for link in table["links"]] == [("decode-0-0", "serve")]
        # a smaller table unlinks what it leaves out
        body["peers"] = [_node(stack, "prefill-0-1", 2)]
        await _call(session, "POST", f"{decode}/v1/role/decode", body)
        settled = await _settled(session, decode)
        assert settled["linkStatus"]["peers"] == [{"target": 2, "link": "ok"}]
        _, table = await _call(session, "GET", f"{stack.url('prefill-0-0')}/sandbox/kv/links")
        assert table["links"] == []


async def test_a_switch_with_open_links_is_refused_with_exist_link_and_succeeds_once_unlinked():
    async with PDStack(engine="mindie", prefill=2, env=FAST) as stack, aiohttp.ClientSession() as session:
        decode, spare = stack.url("decode-0-0"), stack.url("prefill-0-1")
        everyone = [_node(stack, "prefill-0-0", 1), _node(stack, "prefill-0-1", 2)]
        await _call(
            session,
            "POST",
            f"{decode}/v1/role/decode",
            {"local": _node(stack, "decode-0-0", 3), "peers": everyone},
        )
        await _settled(session, decode)
        switch = {"local": _node(stack, "prefill-0-1", 2), "peers": [_node(stack, "prefill-0-0", 1)]}
        status, answer = await _call(session, "POST", f"{spare}/v1/role/decode", switch)
        # MindIE-LLM's error shape and nothing else; the code and the open links are in its text
        assert (status, set(answer), answer["error_type"]) == (
            503,
            {"error", "error_type"},
            "Service Unavailable",
        )
        assert "LLM_EXIST_LINK" in answer["error"] and "decode-0-0" in answer["error"]
        # the decode drops its link to the instance, which then switches and links to the other prefill
        await _call(
            session,
            "POST",
            f"{decode}/v1/role/decode",
            {"local": _node(stack, "decode-0-0", 3), "peers": [everyone[0]]},
        )
        await _settled(session, decode)
        started = time.monotonic()
        status, answer = await _call(session, "POST", f"{spare}/v1/role/decode", switch)
        assert (status, answer) == (200, {"result": "ok"})
        _, during = await _call(session, "GET", f"{spare}/v1/status")
        assert during["service"]["roleStatus"] == "RoleSwitching"
        settled = await _settled(session, spare)
        assert time.monotonic() - started >= 0.05  # 500 ms switch + one 150 ms link, times 0.1
        assert settled["service"]["currentRole"] == "decode"
        assert settled["linkStatus"]["peers"] == [{"target": 1, "link": "ok"}]
        assert stack.farm.role("sim/prefill-0-1") == "decode"


async def test_bad_bodies_other_engines_and_busy_instances_are_refused():
    async with PDStack(engine="mindie", env=FAST) as stack, aiohttp.ClientSession() as session:
        prefill = stack.url("prefill-0-0")
        status, answer = await _call(session, "POST", f"{prefill}/v1/role/decode", {"local": {}})
        assert (status, answer["error_type"]) == (422, "Input validation error")
        status, answer = await _call(
            session,
            "POST",
            f"{prefill}/v1/role/decode",
            {"local": _node(stack, "prefill-0-0", 1), "peers": []},
        )
        assert status == 503 and "peers can't be empty" in answer["error"]
    async with PDStack(engine="vllm", env=FAST) as stack, aiohttp.ClientSession() as session:
        status, _ = await _call(session, "GET", f"{stack.url('prefill-0-0')}/v1/status")
        assert status == 404
        status, _ = await _call(session, "POST", f"{stack.url('prefill-0-0')}/v1/role/decode", {})
        assert status == 404


async def test_on_npus_every_instance_must_list_its_devices_as_the_device_plugin_gave_them():
    env = {**FAST, "ASCEND_VISIBLE_DEVICES": "2,3"}
    async with PDStack(engine="mindie", env=env) as stack, aiohttp.ClientSession() as session:
        decode = stack.url("decode-0-0")

        def node(pod: str, number: int, ids: list[str]) -> dict:
            devices = [
                {"device_id": i, "device_ip": f"192.168.0.{100 + int(i)}", "device_logical_id": str(n)}
                for n, i in enumerate(ids)
            ]
            return {**_node(stack, pod, number), "device": devices}

        url = f"{decode}/v1/role/decode"
        cases = [
            (
                {"local": _node(stack, "decode-0-0", 2), "peers": [node("prefill-0-0", 1, ["2", "3"])]},
                "holds",
            ),
            ({"local": node("decode-0-0", 2, ["0", "1"]), "peers": [node("prefill-0-0", 1, ["2"])]}, "holds"),
            (
                {"local": node("decode-0-0", 2, ["2", "3"]), "peers": [_node(stack, "prefill-0-0", 1)]},
                "no NPU",
            ),
        ]
        for body, why in cases:
            status, answer = await _call(session, "POST", url, body)
            assert (status, answer["error_type"]) == (422, "Input validation error"), answer
            assert why in answer["error"]
        bad_id = node("prefill-0-0", 1, ["2"])
        bad_id["device"][0]["device_id"] = 2
        status, answer = await _call(
            session, "POST", url, {"local": node("decode-0-0", 2, ["2", "3"]), "peers": [bad_id]}
        )
        assert status == 422 and "string of digits" in answer["error"]
        body = {"local": node("decode-0-0", 2, ["3", "2"]), "peers": [node("prefill-0-0", 1, ["2", "3"])]}
        status, answer = await _call(session, "POST", url, body)
        assert (status, answer) == (200, {"result": "ok"})
        assert (await _settled(session, decode))["linkStatus"]["peers"][0]["link"] == "ok"
