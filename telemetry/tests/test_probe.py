"""Tandem's probe through one pair, against simulated engines over real HTTP: what it reports for a
healthy pair, a refusing pod, a dead link and a silent decode pod, and what that says about the link."""

from __future__ import annotations

import aiohttp

from sandbox.engine.testing import PDStack
from telemetry.links import probe_says_link_failed
from telemetry.probe import ProbeTarget, probe_pair

FAST = {"SANDBOX_TIME_SCALE": "0.05"}


def target(stack: PDStack) -> ProbeTarget:
    return ProbeTarget(
        prefill="prefill-0-0",
        decode="decode-0-0",
        prefill_url=stack.url("prefill-0-0"),
        decode_url=stack.url("decode-0-0"),
        model="sim-model",
    )


async def fault(session: aiohttp.ClientSession, url: str, body: dict) -> None:
    async with session.post(f"{url}/sandbox/faults", json=body) as response:
        assert response.status == 201


async def test_a_healthy_pair_answers_and_the_decode_pod_pulled_the_probes_kv():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        result = await probe_pair(session, target(stack), timeout_s=2.0)
        assert result["ok"] is True and result["stage"] is None and result["status"] == 200
        assert result["ms"] is not None and result["ms"] > 0
        assert result["request_id"].startswith("tandem-probe-")
        async with session.get(f"{stack.url('decode-0-0')}/sandbox/kv/links") as response:
            pulls = {link["peer"]: link["transfers"] for link in (await response.json())["links"]}
        assert pulls == {"prefill-0-0": 1}  # it went through exactly this pair


async def test_a_refusing_pod_is_reported_where_it_refused_and_says_nothing_about_the_link():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        await fault(session, stack.url("prefill-0-0"), {"kind": "http_429"})
        first = await probe_pair(session, target(stack), timeout_s=2.0)
        assert (first["ok"], first["stage"], first["status"]) == (False, "prefill", 429)
        assert "Rate limit" in first["error"]
        await session.delete(f"{stack.url('prefill-0-0')}/sandbox/faults")
        await fault(session, stack.url("decode-0-0"), {"kind": "http_5xx", "status": 503})
        second = await probe_pair(session, target(stack), timeout_s=2.0)
        assert (second["stage"], second["status"]) == ("decode", 503)
        assert probe_says_link_failed(second) is False


async def test_a_dead_link_with_fail_policy_fails_the_decode_step_with_the_kv_error():
    env = {**FAST, "SANDBOX_KV_FAILURE_POLICY": "fail"}
    async with PDStack(env=env) as stack, aiohttp.ClientSession() as session:
        await fault(session, stack.url("decode-0-0"), {"kind": "link_down", "peer": "prefill-0-0"})
        result = await probe_pair(session, target(stack), timeout_s=3.0)
        assert (result["stage"], result["status"]) == ("decode", 500), result
        assert "timed out" in result["error"]
        assert probe_says_link_failed(result) is True


async def test_a_decode_pod_that_never_answers_is_a_failed_link_within_the_deadline():
    async with PDStack(env=FAST) as stack, aiohttp.ClientSession() as session:
        await fault(session, stack.url("decode-0-0"), {"kind": "slow", "delay_ms": 5000})
        result = await probe_pair(session, target(stack), timeout_s=0.5)
        assert (result["stage"], result["status"]) == ("decode", None)
        assert result["error"] == "no answer from the decode pod within 0.5 s"
        assert probe_says_link_failed(result) is True
