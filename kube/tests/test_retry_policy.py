from __future__ import annotations

import random

from kube.retry import Action, RetryPolicy, backoff, decide, parse_retry_after

POLICY = RetryPolicy(max_attempts=4, base_delay=0.2, max_delay=5.0, max_retry_after=30.0)


def test_429_waits_what_retry_after_says():
    decision = decide(attempt=1, status=429, retry_after="7", policy=POLICY)
    assert decision.action is Action.RETRY
    assert decision.delay == 7.0


def test_429_retry_after_is_capped():
    assert decide(attempt=1, status=429, retry_after="3600", policy=POLICY).delay == 30.0


def test_429_without_retry_after_backs_off():
    decision = decide(attempt=2, status=429, policy=POLICY, rand=random.Random(1))
    assert decision.action is Action.RETRY
    assert 0.2 <= decision.delay <= 0.4


def test_422_validation_error_is_never_retried():
    assert decide(attempt=1, status=422, policy=POLICY).action is Action.GIVE_UP
    assert decide(attempt=1, status=400, policy=POLICY).action is Action.GIVE_UP


def test_other_4xx_are_not_retried():
    for status in (401, 403, 404):
        assert decide(attempt=1, status=status, policy=POLICY).action is Action.GIVE_UP


def test_409_on_update_rereads_but_409_on_create_gives_up():
    assert decide(attempt=1, status=409, is_update=True, policy=POLICY).action is Action.REREAD
    assert decide(attempt=1, status=409, policy=POLICY).action is Action.GIVE_UP


def test_5xx_and_connection_errors_back_off_exponentially_with_a_cap():
    rand = random.Random(7)
    delays = [decide(attempt=a, status=503, policy=POLICY, rand=rand).delay for a in (1, 2, 3)]
    assert 0.1 <= delays[0] <= 0.2
    assert 0.2 <= delays[1] <= 0.4
    assert 0.4 <= delays[2] <= 0.8
    assert decide(attempt=1, status=None, connection_error=True, policy=POLICY).action is Action.RETRY
    big = RetryPolicy(max_attempts=50, base_delay=0.2, max_delay=5.0)
    assert backoff(20, big) <= 5.0


def test_501_not_implemented_is_not_retried():
    assert decide(attempt=1, status=501, policy=POLICY).action is Action.GIVE_UP


def test_attempts_are_bounded():
    assert decide(attempt=4, status=503, policy=POLICY).action is Action.GIVE_UP
    assert decide(attempt=4, status=429, retry_after="1", policy=POLICY).action is Action.GIVE_UP
    assert decide(attempt=4, status=None, connection_error=True, policy=POLICY).action is Action.GIVE_UP


def test_retry_after_parsing():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert parse_retry_after(None) is None
