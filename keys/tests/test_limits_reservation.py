"""Token limits are reserved at admission and settled after, windows follow Redis's clock, and a
concurrency slot is a lease renewed while its request lives (against the real Redis)."""

from __future__ import annotations

import asyncio
import calendar
from datetime import UTC, datetime
from typing import Any

import pytest

from keys import hotpath, hotpath_async, limits, tokens
from keys.limit_scripts import WINDOWS_LUA
from keys.selectors import key_record_for_digest


def redis_(client: Any) -> Any:
    return client


def record_for(issue, owner, **given):
    issued = issue(owner, purpose="production", limits_given=given)
    record = key_record_for_digest(
        digest=tokens.digest(issued.secret, hotpath.pepper()),
        generation=limits.current_generation(str(issued.key.pk)),
    )
    assert record is not None
    return record


def test_windows_are_computed_from_redis_time_as_the_utc_calendar_says():
    """The script's calendar (Redis has no os.date) against Python's, over month, leap-year and
    century ends; TIME is replaced by the instant under test."""
    script = WINDOWS_LUA.replace("redis.call('TIME')", "{ARGV[1], '250000'}") + (
        "return {minute, hour, day, month, stamp}"
    )
    instants = [datetime(1970, 1, 1, tzinfo=UTC), datetime(2000, 2, 29, 23, 59, 59, tzinfo=UTC)]
    instants += [datetime(2100, 3, 1, 0, 0, tzinfo=UTC), datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC)]
    for year in (2024, 2025, 2026):
        for month in range(1, 13):
            last = calendar.monthrange(year, month)[1]
            instants += [
                datetime(year, month, last, 23, 59, 59, tzinfo=UTC),
                datetime(year, month, 1, tzinfo=UTC),
            ]
    r: Any = limits.client()
    for when in instants:
        seconds = calendar.timegm(when.timetuple())
        got = [part.decode() for part in r.eval(script, 0, str(seconds))]
        w = limits.Windows.at(when)
        assert got == [w.minute, w.hour, w.day, w.month, f"{seconds}.250000"], when


def test_a_callers_clock_does_not_choose_the_window(db, issue, operator):
    record = record_for(issue, operator, tokens_per_minute=1000)
    outcome = limits.acquire(record, slot="s1", source_ip=None, reserve=10)
    assert isinstance(outcome, limits.Acquired)
    assert outcome.windows[0] == limits.Windows.at(limits.redis_now()).minute


def test_token_reservations_hold_concurrent_requests_within_the_limit_and_settle_to_actual_usage(
    db, issue, operator
):
    record = record_for(issue, operator, tokens_per_minute=100, tokens_per_day=1000)
    first = limits.acquire(record, slot="a", source_ip=None, reserve=60)
    assert isinstance(first, limits.Acquired) and first.reserved == 60
    # Before the first settles, a second request that could cost 60 more would pass the limit.
    second = limits.acquire(record, slot="b", source_ip=None, reserve=60)
    assert isinstance(second, limits.OverLimit)
    assert (second.limit, second.used, second.allowed, second.needed) == ("tokens_per_minute", 60, 100, 60)
    refusal = hotpath.over_limit(second, record)
    assert refusal.status == 429 and "60 reserved tokens" in refusal.message
    # A small one fits beside the reservation.
    small = limits.acquire(record, slot="c", source_ip=None, reserve=40)
    assert isinstance(small, limits.Acquired)
    assert limits.current_usage(record.key_id)["tokens_this_minute"] == 100
    # The first used 15 of its 60: the reservation is taken back and the 15 charged.
    limits.settle(record, slot="", tokens=15, reserved=first.reserved, windows=first.windows)
    limits.settle(record, slot="", tokens=40, reserved=small.reserved, windows=small.windows)
    usage = limits.current_usage(record.key_id)
    assert (usage["tokens_this_minute"], usage["tokens_today"]) == (55, 55)
    assert isinstance(limits.acquire(record, slot="d", source_ip=None, reserve=45), limits.Acquired)


def test_a_request_that_could_never_fit_is_told_to_lower_max_tokens(db, issue, operator):
    record = record_for(issue, operator, tokens_per_minute=100)
    outcome = limits.acquire(record, slot="a", source_ip=None, reserve=4096)
    assert isinstance(outcome, limits.OverLimit)
    refusal = hotpath.over_limit(outcome, record)
    assert refusal.status == 400 and refusal.code == "max_tokens_over_limit"
    assert "lower `max_tokens`" in refusal.message


def test_a_slot_is_a_lease_renewed_while_alive_and_freed_only_when_it_lapses(db, issue, operator):
    record = record_for(issue, operator, max_concurrent=1)
    slots = limits.counter_key(record.key_id, "conc", "slots")
    r: Any = limits.client()
    held = limits.acquire(record, slot="long-stream", source_ip=None)
    assert isinstance(held, limits.Acquired)
    expires = float(r.zscore(slots, "long-stream"))
    now = limits.redis_now().timestamp()
    assert now + limits.SLOT_LEASE_SECONDS - 2 < expires <= now + limits.SLOT_LEASE_SECONDS + 1
    # Ten minutes into a stream whose lease kept being renewed: still held (it used to free itself at 600 s).
    r.zadd(slots, {"long-stream": now + 5})
    assert limits.renew(record, slot="long-stream")
    assert float(r.zscore(slots, "long-stream")) > now + limits.SLOT_LEASE_SECONDS - 2
    assert isinstance(limits.acquire(record, slot="other", source_ip=None), limits.OverLimit)
    # Its process died: nobody renews, the lease lapses and the slot is free again.
    r.zadd(slots, {"long-stream": now - 1})
    assert isinstance(limits.acquire(record, slot="other", source_ip=None), limits.Acquired)
    assert not limits.renew(record, slot="gone")


def test_the_gateway_renews_a_live_requests_lease(transactional_db, issue, operator, monkeypatch):
    monkeypatch.setattr(limits, "SLOT_LEASE_SECONDS", 1.5)  # renewed every 0.5 s
    issued = issue(operator, purpose="production", kind="inference", limits_given={"max_concurrent": 1})
    slots = limits.counter_key(str(issued.key.pk), "conc", "slots")

    async def run() -> tuple[float, float, int]:
        grant = await hotpath_async.authenticate(issued.secret, kind="inference", source_ip=None)
        await asyncio.sleep(2.2)  # past the first lease: alive, so renewed
        alive = float(redis_(limits.client()).zscore(slots, grant.slot))
        now = limits.redis_now().timestamp()
        await grant.settle()
        return alive, now, int(redis_(limits.client()).zcard(slots))

    alive, now, left = asyncio.run(run())
    assert alive > now
    assert left == 0


def test_reservation_never_leaves_a_window_negative(db, issue, operator):
    record = record_for(issue, operator, tokens_per_day=500)
    got = limits.acquire(record, slot="", source_ip=None, reserve=50)
    assert isinstance(got, limits.Acquired)
    limits.client().delete(limits.counter_key(record.key_id, "td", got.windows[1]))  # the window expired
    limits.settle(record, slot="", tokens=0, reserved=got.reserved, windows=got.windows)
    assert limits.current_usage(record.key_id)["tokens_today"] == 0


@pytest.fixture(autouse=True)
def _fresh_async_clients():
    hotpath_async._clients.clear()
    hotpath_async._lanes.clear()
    hotpath_async._renew_scripts.clear()
    yield
    hotpath_async._clients.clear()
    hotpath_async._lanes.clear()
    hotpath_async._renew_scripts.clear()
