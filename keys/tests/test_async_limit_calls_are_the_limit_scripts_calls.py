"""The gateway's pre-packed limit calls send exactly what keys.limits builds, every minute and request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from keys import hotpath_async, limits, tokens
from keys.selectors import key_record_for_digest


def resp(sha: str, keys: list[str], args: list[str]) -> bytes:
    parts = ["EVALSHA", sha, str(len(keys)), *keys, *args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p.encode()), p.encode()) for p in parts)


@pytest.fixture
def record(operator, issue):
    issued = issue(
        operator,
        purpose="production",
        limits_given={"requests_per_minute": 100, "tokens_per_day": 5000, "max_concurrent": 4},
    )
    digest = tokens.digest(issued.secret, hotpath_async.pepper())
    found = key_record_for_digest(digest=digest, generation="g1")
    assert found is not None
    return found


@pytest.mark.parametrize("source_ip", ["10.1.2.3", None, "2001:db8::7"])
@pytest.mark.parametrize("reserve", [0, 1, 4096])
def test_acquire_calls_match_limits_across_a_minute_and_day_boundary(record, source_ip, reserve):
    start = datetime(2026, 12, 31, 23, 59, 58, 250000, tzinfo=UTC)
    for step in range(6):  # 23:59:58 .. 00:00:03: the cache's minute, day, month and year all change
        now = start + timedelta(seconds=step, microseconds=137 * step)
        slot = f"slot-{step}"
        call, parts = hotpath_async._acquire_command(
            record, slot=slot, source_ip=source_ip, reserve=reserve, now=now
        )
        keys, args = limits.acquire_call(record, slot=slot, source_ip=source_ip, reserve=reserve)
        assert call.command("0" * 40, parts) == resp("0" * 40, keys, args)


@pytest.mark.parametrize("used", [0, 17, -3])
@pytest.mark.parametrize("reserved", [0, 300])
def test_settle_calls_match_limits(record, used, reserved):
    for minute in range(3):
        windows = (f"20260630235{minute}", "20260630", "202606")
        call, parts = hotpath_async._settle_command(
            record, slot="abc", tokens=used, reserved=reserved, windows=windows
        )
        keys, args = limits.settle_call(record, slot="abc", tokens=used, reserved=reserved, windows=windows)
        assert call.command("f" * 40, parts) == resp("f" * 40, keys, args)


def test_a_changed_key_gets_its_own_calls(record):
    import dataclasses

    now = datetime(2026, 3, 1, 8, 0, 0, tzinfo=UTC)
    hotpath_async._acquire_command(record, slot="s", source_ip=None, reserve=0, now=now)
    tighter = dataclasses.replace(record, limits=dataclasses.replace(record.limits, requests_per_minute=7))
    call, parts = hotpath_async._acquire_command(tighter, slot="s", source_ip=None, reserve=0, now=now)
    keys, args = limits.acquire_call(tighter, slot="s", source_ip=None, reserve=0)
    assert call.command("0" * 40, parts) == resp("0" * 40, keys, args)
    assert b"$1\r\n7\r\n" in call.command("0" * 40, parts)


def test_a_key_without_token_limits_reserves_nothing(record):
    import dataclasses

    untokened = dataclasses.replace(record, limits=dataclasses.replace(record.limits, tokens_per_day=None))
    now = datetime(2026, 3, 1, 8, 0, 0, tzinfo=UTC)
    call, parts = hotpath_async._acquire_command(untokened, slot="s", source_ip=None, reserve=900, now=now)
    assert call.complete
    keys, args = limits.acquire_call(untokened, slot="s", source_ip=None, reserve=900)
    assert args[-1] == "0"
    assert call.command("0" * 40, parts) == resp("0" * 40, keys, args)
