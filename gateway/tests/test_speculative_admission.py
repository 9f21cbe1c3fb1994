"""Speculative admission through a running gateway: a warm key's request goes upstream while Redis
checks it, its answer waits for the check, and a refusal or a revocation cancels it unseen.

Redis is reached through a relay that can hold every byte for a while (test_redis_down_gateway's), so
the check's round trip is long enough to tell, from the upstream's clock, whether the request left the
gateway before or after it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from aiohttp import web

from gateway.services import route_update
from gateway.tests.conftest import MODEL, running_gateway
from gateway.tests.test_redis_down_gateway import chat, redis_switch
from keys.tests.test_limits_multiprocess import fresh_minute
from tests.support import free_port

pytestmark = pytest.mark.django_db(transaction=True)

DELAY = 0.4  # each way through the relay: a limit check takes at least 0.8 s
ANSWER = "the upstream's answer"


@dataclass
class Upstream:
    """A chat-completions server that notes when each request arrived and answers after `answer_after`."""

    answer_after: float = 0.0
    arrived: list[float] = field(default_factory=list)

    async def chat(self, request: web.Request) -> web.Response:
        self.arrived.append(time.monotonic())
        await request.read()
        await asyncio.sleep(self.answer_after)
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
                ],
                "usage": usage,
            }
        )


@pytest.fixture
def upstream() -> Iterator[tuple[Upstream, str]]:
    served = Upstream()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    port = free_port()

    async def start() -> web.AppRunner:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", served.chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return runner

    runner = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    yield served, f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.fixture
def routed(make_topology, admin_user, upstream) -> tuple[Upstream, Any]:
    served, url = upstream
    topology = make_topology()
    route_update(topology=topology, changes={"endpoint_url": url}, actor=admin_user)
    return served, topology


def timed(base: str, secret: str, served: Upstream) -> tuple[requests.Response, float, float]:
    """A chat call: its answer, and when the upstream and the caller had it (s after sending)."""
    before = len(served.arrived)
    sent = time.monotonic()
    answer = chat(base, secret)
    done = time.monotonic() - sent
    reached = served.arrived[before] - sent if len(served.arrived) > before else float("inf")
    return answer, reached, done


@pytest.mark.parametrize("speculative", [True, False], ids=["speculative", "checked-first"])
def test_a_warm_keys_request_goes_upstream_while_redis_checks_it_and_its_answer_waits(
    routed, inference_key, tmp_path, speculative
):
    served, _ = routed
    issued = inference_key(name="far-redis", limits_given={"requests_per_minute": 100})
    with redis_switch() as relay:
        env = {
            "REDIS_URL": relay.url,
            "KEYS_REDIS_TIMEOUT_MS": "5000",
            "GATEWAY_SPECULATIVE_ADMISSION": "true" if speculative else "false",
        }
        with running_gateway(tmp_path / "gw.log", **env) as base:
            first = chat(base, issued.secret)  # the key is read from the database: now it is warm
            assert first.status_code == 200, first.text
            relay.delay = DELAY
            answer, reached, done = timed(base, issued.secret, served)
            relay.delay = 0.0
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == ANSWER
    assert done >= 2 * DELAY  # the answer waited for the check, either way
    if speculative:
        assert reached < DELAY, f"the request reached the upstream {reached:.3f} s after it was sent"
    else:
        assert reached >= 2 * DELAY, f"the request reached the upstream {reached:.3f} s after it was sent"


def test_a_request_over_the_limit_is_refused_before_the_upstream_answers_and_the_key_is_then_checked_first(
    routed, inference_key, tmp_path
):
    served, _ = routed
    issued = inference_key(name="two-a-minute", limits_given={"requests_per_minute": 2})
    with running_gateway(tmp_path / "gw.log") as base:
        fresh_minute(min_left=20)  # the limit counts per minute: all of it in one window
        assert [chat(base, issued.secret).status_code for _ in range(2)] == [200, 200]
        served.answer_after = 3.0
        over, _, took = timed(base, issued.secret, served)  # warm: speculated, refused by the check
        assert over.status_code == 429, over.text
        assert over.json()["error"]["code"] == "limit_exceeded"
        assert ANSWER not in over.text
        assert took < served.answer_after, f"the refusal waited for the upstream: {took:.2f} s"
        time.sleep(0.3)
        seen = len(served.arrived)
        assert seen <= 3
        again, reached, _ = timed(base, issued.secret, served)  # refused lately: checked before it goes
        assert again.status_code == 429
        time.sleep(0.3)
        assert len(served.arrived) == seen and reached == float("inf")


def test_a_key_revoked_while_warm_gets_no_answer_of_a_request_already_sent(
    routed, inference_key, admin_user, tmp_path
):
    from keys.services import key_revoke

    served, _ = routed
    served.answer_after = 1.0
    issued = inference_key(name="revoked-warm")
    with running_gateway(tmp_path / "gw.log") as base:
        assert chat(base, issued.secret).status_code == 200
        key_revoke(key=issued.key, actor=admin_user, reason="leaked")
        refused, _, took = timed(base, issued.secret, served)
        assert refused.status_code == 401, refused.text
        assert ANSWER not in refused.text
        assert took < served.answer_after
