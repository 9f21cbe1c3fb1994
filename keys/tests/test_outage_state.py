"""The outage state a process keeps while Redis is away."""

from __future__ import annotations

from keys import outage


def test_only_the_call_that_finds_redis_up_says_it_went_away():
    outage.mark_up()
    try:
        # The calls in flight when Redis goes away fail together: the first says so, the rest do not.
        assert outage.mark_down() is True
        assert outage.redis_away()
        assert [outage.mark_down() for _ in range(3)] == [False, False, False]
        outage.mark_up()
        assert not outage.redis_away()
        assert outage.mark_down() is True  # a new outage is told again
    finally:
        outage.mark_up()
