"""Faults injected through the admin API and the `python -m sandbox fault` CLI."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time

import aiohttp

from sandbox.engine import cli
from sandbox.engine.farm import EngineFarm
from sandbox.engine.testing import engine_spec, loopback_base

BODY = {"model": "sim-model", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}


async def _farm() -> tuple[EngineFarm, str]:
    farm = EngineFarm()
    await farm.start(
        "ns/e-0", f"{loopback_base()}.2", engine_spec("both", env={"SANDBOX_TIME_SCALE": "0.05"}), {}
    )
    ip, port = farm.address("ns/e-0")
    return farm, f"http://{ip}:{port}"


async def _inject(session: aiohttp.ClientSession, url: str, fault: dict) -> int:
    async with session.post(f"{url}/sandbox/faults", json=fault) as response:
        return response.status


async def test_http_faults_break_inference_but_not_health():
    farm, url = await _farm()
    try:
        async with aiohttp.ClientSession() as session:
            assert await _inject(session, url, {"kind": "http_5xx", "status": 502, "count": 1}) == 201
            async with session.post(f"{url}/v1/chat/completions", json=BODY) as response:
                assert response.status == 502
                assert (await response.json())["error"]["code"] == 502
            async with session.post(f"{url}/v1/chat/completions", json=BODY) as response:
                assert response.status == 200  # count=1: the fault expired
            await _inject(session, url, {"kind": "http_401"})
            async with session.post(f"{url}/v1/chat/completions", json=BODY) as response:
                assert response.status == 401
            async with session.delete(f"{url}/sandbox/faults") as response:
                assert (await response.json())["removed"] == 1
            await _inject(session, url, {"kind": "http_429", "count": 1})
            async with session.post(f"{url}/v1/chat/completions", json=BODY) as response:
                assert response.status == 429
                assert response.headers["Retry-After"] == "1"
                assert (await response.json())["error"]["type"] == "RateLimitError"
            await _inject(session, url, {"kind": "non_json"})
            async with session.post(f"{url}/v1/chat/completions", json=BODY) as response:
                assert response.status == 200
                assert response.content_type == "text/html"
                assert (await response.text()).startswith("<html>")
            async with session.get(f"{url}/health") as response:
                assert response.status == 200
        assert farm.is_healthy("ns/e-0")
    finally:
        await farm.close()


async def test_slow_fault_delays_only_its_target():
    farm, url = await _farm()
    try:
        async with aiohttp.ClientSession() as session:
            await _inject(session, url, {"kind": "slow", "delay_ms": 600, "target": "metrics"})
            started = time.monotonic()
            async with session.post(f"{url}/v1/chat/completions", json=BODY) as response:
                assert response.status == 200
            fast = time.monotonic() - started
            started = time.monotonic()
            async with session.get(f"{url}/metrics") as response:
                assert response.status == 200
            slow = time.monotonic() - started
        assert slow >= 0.6 > fast
    finally:
        await farm.close()


async def test_crash_closes_the_port_and_the_kubelet_sees_it():
    farm, url = await _farm()
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{url}/sandbox/faults", json={"kind": "crash"}) as response:
                assert response.status == 202
            await asyncio.sleep(0.05)
            assert farm.has_crashed("ns/e-0")
            assert not farm.is_healthy("ns/e-0")
            assert any("EngineDeadError" in line for line in farm.logs("ns/e-0"))
        async with aiohttp.ClientSession() as fresh:
            try:
                async with fresh.get(f"{url}/health") as response:
                    assert response.status == 503
            except aiohttp.ClientConnectionError:
                pass  # connection refused: the process is gone
        await farm.stop("ns/e-0", 0)
        await farm.start("ns/e-0", url.split("//")[1].split(":")[0], engine_spec("both"), {})
        assert not farm.has_crashed("ns/e-0")
        assert farm.is_healthy("ns/e-0")
    finally:
        await farm.close()


async def test_invalid_faults_name_the_field_and_the_fix():
    farm, url = await _farm()
    try:
        async with aiohttp.ClientSession() as session:
            for fault, field in (
                ({"kind": "meteor"}, "kind"),
                ({"kind": "http_5xx", "status": 404}, "status"),
                ({"kind": "link_slow", "factor": 0.5}, "factor"),
                ({"kind": "slow", "count": 0}, "count"),
            ):
                async with session.post(f"{url}/sandbox/faults", json=fault) as response:
                    assert response.status == 400
                    error = (await response.json())["error"]
                    assert error["field"] == field
                    assert error["message"]
    finally:
        await farm.close()


async def test_fault_cli_injects_shows_and_clears():
    farm, url = await _farm()
    ip, port = url.removeprefix("http://").split(":")

    def run(*argv: str) -> tuple[int, dict]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(["--pod-ip", ip, "--port", port, *argv])
        return code, json.loads(out.getvalue())

    try:
        code, answer = await asyncio.to_thread(run, "--kind", "link_down", "--peer", "prefill-0")
        assert code == 0
        assert answer["faults"][0]["kind"] == "link_down"
        code, shown = await asyncio.to_thread(run, "--show")
        assert shown["faults"][0]["peer"] == "prefill-0"
        assert shown["kv_links"]["pod"] == "e-0"
        code, cleared = await asyncio.to_thread(run, "--clear", "--kind", "link_down")
        assert (code, cleared["removed"]) == (0, 1)
    finally:
        await farm.close()
