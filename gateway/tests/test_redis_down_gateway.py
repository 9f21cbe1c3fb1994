"""Redis stopped and started again under a running gateway: inference goes on within each process's
share of the key's limits, and what was counted meanwhile reaches Redis when it is back."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
import requests
from django.conf import settings

from gateway.services import route_update
from gateway.tests.conftest import MODEL, running_gateway
from keys import limits
from tests.support import free_port


class RedisSwitch:
    """A TCP relay in front of the test's Redis that can be cut (connections reset, nothing accepted)
    and restored: Redis stopped and started, as the gateway sees it."""

    def __init__(self) -> None:
        target = urlsplit(settings.REDIS_URL)
        self.target = (target.hostname or "127.0.0.1", target.port or 6379)
        self.db = target.path
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}{self.db}"

    delay = 0.0  # seconds each byte spends in the relay, each way: a Redis that far away

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await reader.read(65536):
                if self.delay:  # in order: what arrives later is written later
                    loop.call_at(loop.time() + self.delay, writer.write, data)
                else:
                    writer.write(data)
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            loop.call_at(loop.time() + self.delay, writer.close)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _start(self) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", self.port)

    async def _stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()
        await self.server.wait_closed()

    def up(self) -> None:
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(5)

    def down(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(5)


@contextmanager
def redis_switch() -> Iterator[RedisSwitch]:
    switch = RedisSwitch()
    switch.thread.start()
    switch.up()
    try:
        yield switch
    finally:
        switch.loop.call_soon_threadsafe(switch.loop.stop)


def chat(base: str, secret: str, content: str = "hi") -> requests.Response:
    return requests.post(
        f"{base}/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 8},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )


def usage_in_redis(key_id: str) -> tuple[int, int, int]:
    r: Any = limits.client()
    requests_, tokens_, denied = 0, 0, 0
    for name in r.scan_iter(limits.usage_key(key_id, "*")):
        values = {k.decode(): int(v) for k, v in r.hgetall(name).items()}
        requests_ += values.get("requests", 0)
        tokens_ += values.get("tokens", 0)
        denied += values.get("denied", 0)
    return requests_, tokens_, denied


@pytest.mark.django_db(transaction=True)
def test_gateway_serves_through_a_redis_outage_and_reconciles_its_usage(
    make_topology, inference_key, admin_user, cluster_stack, tmp_path
):
    topology = make_topology()
    route_update(topology=topology, changes={"endpoint_url": cluster_stack.url}, actor=admin_user)
    issued = inference_key(name="through-outage", limits_given={"requests_per_minute": 8})
    key_id = str(issued.key.pk)
    headers = {"Authorization": f"Bearer {issued.secret}"}
    with redis_switch() as switch:
        switch.down()  # the gateway starts, and meets its first request, with Redis away
        with running_gateway(tmp_path / "gw.log", REDIS_URL=switch.url) as base:
            during = [chat(base, issued.secret) for _ in range(3)]
            # Served (it was a 502 "could not relay"), within this process's share: 8 a minute / 4 = 2.
            assert [r.status_code for r in during] == [200, 200, 429], [r.text for r in during]
            assert during[0].json()["choices"][0]["message"]["content"]
            refused = during[2].json()["error"]
            assert refused["code"] == "limit_exceeded" and refused["limit"]["value"] == 2
            served_tokens = sum(r.json()["usage"]["total_tokens"] for r in during[:2])
            models = requests.get(f"{base}/v1/models", headers=headers, timeout=10)
            assert models.status_code == 429  # /v1/models counts as a request too: over the share
            wrong = requests.get(f"{base}/v1/models", headers={"Authorization": "Bearer nope"}, timeout=10)
            assert wrong.status_code == 401
            assert usage_in_redis(key_id) == (0, 0, 0)

            switch.up()
            time.sleep(1.1)  # the process retries Redis at most once a second
            after = chat(base, issued.secret)
            assert after.status_code == 200, after.text
            deadline = time.monotonic() + 5
            want = (3, served_tokens + after.json()["usage"]["total_tokens"], 2)
            while usage_in_redis(key_id) != want and time.monotonic() < deadline:
                time.sleep(0.1)
            # Every request, token and refusal counted while Redis was away is in Redis's hourly usage.
            assert usage_in_redis(key_id) == want
            minute = limits.Windows.at(limits.redis_now()).minute
            assert int(cast(Any, limits.client()).get(limits.counter_key(key_id, "rpm", minute)) or 0) >= 3
