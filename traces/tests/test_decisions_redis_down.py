"""The gateway's trace decisions while Redis is not answering: an outage it serves through, said in one
warning line per flush, not an error with a traceback every two seconds."""

from __future__ import annotations

import asyncio
import logging

import redis

from keys import limits
from tests.support import closed_port
from traces import gatewayspans


def test_decisions_that_cannot_reach_redis_are_a_warning_naming_redis(monkeypatch, caplog) -> None:
    monkeypatch.setattr(limits, "_client", redis.Redis(port=closed_port(), socket_connect_timeout=1))

    async def flush_one() -> None:
        gatewayspans._dropped[id(asyncio.get_running_loop())] = ["0af7651916cd43dd8448eb211c80319c"]
        await gatewayspans.flush()

    with caplog.at_level(logging.WARNING, logger="traces.gatewayspans"):
        asyncio.run(flush_one())
    lines = [r for r in caplog.records if r.name == "traces.gatewayspans"]
    assert [r.levelname for r in lines] == ["WARNING"], [r.getMessage() for r in lines]
    assert "Redis is not answering (ConnectionError)" in lines[0].getMessage()
    assert lines[0].exc_info is None
