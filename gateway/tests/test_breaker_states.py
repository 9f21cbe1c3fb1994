"""The circuit breaker as a pure state machine: it never wedges half-open, and old answers change nothing."""

from __future__ import annotations

from gateway.breaker import CLOSED, HALF_OPEN, OPEN, Breaker


def opened(now: float = 0.0) -> Breaker:
    breaker = Breaker(failures_to_open=2, open_seconds=10.0)
    for _ in range(2):
        ticket, _ = breaker.allow(now)
        breaker.failure(now, "down", ticket)
    assert breaker.state == OPEN
    return breaker


def test_a_trial_that_ends_neither_way_lets_the_next_request_try():
    breaker = opened()
    trial, changed = breaker.allow(10.0)
    assert trial is not None and trial.trial and changed == HALF_OPEN
    assert breaker.allow(10.1) == (None, None)  # one trial at a time
    breaker.release(trial)  # e.g. the client went away, or an unexpected error
    again, changed = breaker.allow(10.2)
    assert again is not None and again.trial and changed is None
    assert breaker.success(again) == CLOSED


def test_a_success_that_started_before_the_breaker_opened_does_not_close_it():
    breaker = Breaker(failures_to_open=2, open_seconds=10.0)
    slow, _ = breaker.allow(0.0)  # a long request, let through while closed
    for _ in range(2):
        ticket, _ = breaker.allow(1.0)
        breaker.failure(1.0, "down", ticket)
    assert breaker.state == OPEN
    assert breaker.success(slow) is None and breaker.state == OPEN
    trial, _ = breaker.allow(11.0)
    assert breaker.success(slow) is None and breaker.state == HALF_OPEN and breaker.trial_in_flight
    breaker.release(slow)  # an old ticket frees nothing
    assert breaker.allow(11.5) == (None, None)
    assert breaker.failure(12.0, "still down", trial) == OPEN


def test_an_old_failure_neither_reopens_nor_counts_after_the_breaker_closed():
    breaker = opened()
    old, _ = Breaker().allow(0.0)  # generation 0: let through before the breaker opened
    trial, _ = breaker.allow(10.0)
    assert breaker.success(trial) == CLOSED
    assert breaker.failure(10.5, "late", old) is None
    assert breaker.failures == 0 and breaker.state == CLOSED


def test_failures_open_it_and_a_failed_trial_opens_it_again_for_the_full_time():
    breaker = opened(now=0.0)
    assert breaker.allow(9.9) == (None, None)
    trial, _ = breaker.allow(10.0)
    assert breaker.failure(10.0, "no", trial) == OPEN and breaker.last_reason == "no"
    assert breaker.allow(19.9) == (None, None)
    assert breaker.allow(20.0)[0] is not None
