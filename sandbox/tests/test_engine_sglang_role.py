"""SGLang's runtime role switch (`POST /pd_role_switch`, live role in `GET /server_info`): it needs
`--enable-pd-role-switch`, an idle instance and a transfer backend that can switch; it tears the
instance's KV links down itself."""

from __future__ import annotations

import aiohttp

from sandbox.engine.testing import PDStack

FAST = {"SANDBOX_TIME_SCALE": "0.1", "SANDBOX_KV_TIMEOUT_MS": "200"}
SWITCHABLE = ("--model-path", "sim-model", "--enable-pd-role-switch")


async def _call(session: aiohttp.ClientSession, method: str, url: str, body: dict | None = None):
    async with session.request(method, url, json=body) as response:
        return response.status, await response.json()


async def test_an_idle_instance_switches_and_reports_its_live_role():
    async with (
        PDStack(engine="sglang", prefill=2, env=FAST, args=SWITCHABLE) as stack,
        aiohttp.ClientSession() as session,
    ):
        body = {"model": "sim-model", "prompt": "switch " * 40, "max_tokens": 2}
        async with session.post(f"{stack.router_url}/v1/completions", json=body) as response:
            assert response.status == 200
        prefill = stack.url("prefill-0-1")
        _, info = await _call(session, "GET", f"{prefill}/server_info")
        assert info["internal_states"][0]["disaggregation_mode"] == "prefill"
        status, answer = await _call(session, "POST", f"{prefill}/pd_role_switch", {"new_role": "decode"})
        assert (status, answer) == (
            200,
            {"success": True, "message": "ok", "old_role": "prefill", "new_role": "decode"},
        )
        _, info = await _call(session, "GET", f"{prefill}/server_info")
        assert (info["disaggregation_mode"], info["internal_states"][0]["disaggregation_mode"]) == (
            "prefill",
            "decode",
        )
        _, table = await _call(session, "GET", f"{prefill}/sandbox/kv/links")
        assert table["links"] == []  # the switch tore its links down
        status, answer = await _call(session, "POST", f"{prefill}/pd_role_switch", {"new_role": "decode"})
        assert (status, answer["message"]) == (200, "already in target role")


async def test_refusals_name_the_reason():
    async with PDStack(engine="sglang", env=FAST) as stack, aiohttp.ClientSession() as session:
        status, answer = await _call(
            session, "POST", f"{stack.url('prefill-0-0')}/pd_role_switch", {"new_role": "decode"}
        )
        assert (status, answer["success"]) == (400, False)
        assert "--enable-pd-role-switch is not set" in answer["message"]
    async with (
        PDStack(engine="sglang", env=FAST, args=SWITCHABLE, kv_connector="nixl") as stack,
        aiohttp.ClientSession() as session,
    ):
        url = f"{stack.url('prefill-0-0')}/pd_role_switch"
        status, answer = await _call(session, "POST", url, {"new_role": "both"})
        assert status == 400 and "invalid new_role" in answer["message"]
        status, answer = await _call(session, "POST", url, {"new_role": "decode"})
        assert status == 400 and "does not support runtime role switch" in answer["message"]
    async with PDStack(engine="vllm", env=FAST) as stack, aiohttp.ClientSession() as session:
        status, _ = await _call(
            session, "POST", f"{stack.url('prefill-0-0')}/pd_role_switch", {"new_role": "x"}
        )
        assert status == 404
