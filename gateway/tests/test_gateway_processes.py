"""Two gateway processes share one key's limits exactly; no secret reaches their logs."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import requests

from gateway.services import route_update
from gateway.tests.conftest import FALLBACK_MODEL, MODEL, running_gateway


def _fire(urls: list[str], secret: str, n: int) -> list[requests.Response]:
    barrier = threading.Barrier(n)

    def one(i: int) -> requests.Response:
        barrier.wait(10)
        return requests.get(
            f"{urls[i % len(urls)]}/v1/models", headers={"Authorization": f"Bearer {secret}"}, timeout=30
        )

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_requests_per_minute_hold_exactly_across_two_processes(
    make_topology, inference_key, admin_user, cluster_stack, tmp_path
):
    topology = make_topology()
    route_update(topology=topology, changes={"endpoint_url": cluster_stack.url}, actor=admin_user)
    with running_gateway(tmp_path / "a.log") as a, running_gateway(tmp_path / "b.log") as b:
        for _attempt in range(3):  # a run that straddles a minute boundary counts in two windows: retry it
            key = inference_key(name=f"shared-{_attempt}", limits_given={"requests_per_minute": 7})
            minute = datetime.now(UTC).minute
            responses = _fire([a, b], key.secret, 20)
            if datetime.now(UTC).minute == minute:
                break
        codes = [r.status_code for r in responses]
        assert codes.count(200) == 7, codes
        assert codes.count(429) == 13
        refused = next(r for r in responses if r.status_code == 429)
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["error"]["type"] == "rate_limit_error"
        # The same two processes: a small token limit holds under 50 parallel requests (tokens are
        # reserved at admission, so concurrent requests see each other's most; docs/api-keys.md).
        _token_limit_holds_across(a, b, inference_key)


def _token_limit_holds_across(a: str, b: str, inference_key: Any) -> None:
    from keys import limits

    allowed, fired = 300, 50
    for attempt in range(3):  # a burst that straddles a minute counts in two windows: retry it
        key = inference_key(name=f"tokens-{attempt}", limits_given={"tokens_per_minute": allowed})
        minute = limits.Windows.at(limits.redis_now()).minute
        barrier = threading.Barrier(fired)

        def one(i: int, barrier: threading.Barrier = barrier, key=key) -> requests.Response:
            barrier.wait(10)
            return requests.post(
                f"{[a, b][i % 2]}/v1/chat/completions",
                json={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": f"count to {i}"}],
                    "max_tokens": 8,
                },
                headers={"Authorization": f"Bearer {key.secret}"},
                timeout=30,
            )

        with ThreadPoolExecutor(fired) as pool:
            responses = list(pool.map(one, range(fired)))
        if limits.Windows.at(limits.redis_now()).minute == minute:
            break
    served = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(served) + len(refused) == fired, [r.text for r in responses if r.status_code not in (200, 429)]
    assert served and refused
    assert {r.json()["error"]["limit"]["name"] for r in refused} == {"tokens_per_minute"}
    used = sum(r.json()["usage"]["total_tokens"] for r in served)
    counted = limits.current_usage(str(key.key.pk))["tokens_this_minute"]
    # No overshoot: what was served, and what the key was charged (reservations all settled), fit the limit.
    assert used == counted, (used, counted)
    assert counted <= allowed, (counted, allowed, len(served))


def test_concurrency_limit_holds_across_two_processes(make_topology, inference_key, admin_user, tmp_path):
    """Slow upstream answers keep slots held: with max_concurrent=3, at most 3 of 8 run at once."""
    import asyncio

    from aiohttp import web

    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner_box: dict = {}

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(1.5)
        return web.json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    async def start() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", slow)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runner_box["runner"] = runner
        runner_box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        started.set()

    thread = threading.Thread(
        target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True
    )
    thread.start()
    started.wait(10)
    try:
        topology = make_topology()
        route_update(
            topology=topology,
            changes={"endpoint_url": f"http://127.0.0.1:{runner_box['port']}"},
            actor=admin_user,
        )
        key = inference_key(name="narrow", limits_given={"max_concurrent": 3})
        with running_gateway(tmp_path / "a.log") as a, running_gateway(tmp_path / "b.log") as b:
            barrier = threading.Barrier(8)

            def one(i: int) -> int:
                barrier.wait(10)
                return requests.post(
                    f"{[a, b][i % 2]}/v1/chat/completions",
                    json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
                    headers={"Authorization": f"Bearer {key.secret}"},
                    timeout=30,
                ).status_code

            with ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(one, range(8)))
        assert codes.count(200) == 3, codes
        assert codes.count(429) == 5
    finally:
        loop.call_soon_threadsafe(loop.stop)


def test_no_secret_in_gateway_logs_or_records(
    make_topology, inference_key, admin_user, fallback_stack, tmp_path
):
    from audit.models import AuditEvent
    from gateway.models import GatewayRequest
    from keys import services as key_services
    from tests.support import closed_port

    fallback_key = "sk-upstream-" + "Q" * 32
    topology = make_topology()
    route_update(
        topology=topology,
        changes={
            "endpoint_url": f"http://127.0.0.1:{closed_port()}",
            "fallback_base_url": f"{fallback_stack.url}/v1",
            "fallback_model": FALLBACK_MODEL,
            "fallback_api_key": fallback_key,
        },
        actor=admin_user,
    )
    key = inference_key(name="logged")
    log = tmp_path / "gateway.log"
    bodies = []
    with running_gateway(log, LOG_LEVEL="debug") as base:
        headers = {"Authorization": f"Bearer {key.secret}"}
        for payload in (
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
            {"model": "nope"},
            "bad",
        ):
            r = requests.post(f"{base}/v1/chat/completions", json=payload, headers=headers, timeout=30)
            bodies.append(r.text + str(dict(r.headers)))
        broken = key.secret[:-1] + ("A" if key.secret[-1] != "A" else "B")
        for header in (
            f"Bearer {broken}",
            f"Bearer {key.secret} ",
            key.secret,
            f"Bearer Bearer {key.secret}",
        ):
            r = requests.get(f"{base}/v1/models", headers={"Authorization": header}, timeout=30)
            bodies.append(r.text + str(dict(r.headers)))
        key_services.key_revoke(key=key.key, actor=admin_user)
        r = requests.get(f"{base}/v1/models", headers=headers, timeout=30)
        bodies.append(r.text)
    text = log.read_text(errors="replace") + "\n".join(bodies)
    text += "".join(str(e.detail) for e in AuditEvent.objects.all())
    text += "".join(str(vars(r)) for r in GatewayRequest.objects.all())
    for secret in (key.secret, key.secret[10:-4], fallback_key):
        assert secret not in text
