"""After a refusal a key's requests are checked before they go upstream, for the refused window."""

from __future__ import annotations

import time

from keys import speculation
from keys.hotpath import KeyRefused


def test_a_refused_key_is_held_for_at_least_a_minute():
    speculation.hold("k-minute", KeyRefused(429, "limit_exceeded", "over", retry_after=5))
    now = time.monotonic()
    assert speculation.held("k-minute", now=now)
    assert speculation.held("k-minute", now=now + speculation.HOLD_SECONDS - 1)
    assert not speculation.held("k-minute", now=now + speculation.HOLD_SECONDS + 1)
    assert not speculation.held("k-minute", now=now)  # released once: speculated again


def test_a_spent_daily_quota_holds_until_its_window_resets():
    speculation.hold("k-day", KeyRefused(429, "limit_exceeded", "over", retry_after=3 * 3600))
    now = time.monotonic()
    assert speculation.held("k-day", now=now + 2 * 3600)
    assert not speculation.held("k-day", now=now + 3 * 3600 + 1)


def test_a_revocation_holds_the_key_too_and_other_keys_are_free():
    speculation.hold("k-revoked", KeyRefused(401, "key_revoked", "revoked"))
    assert speculation.held("k-revoked")
    assert not speculation.held("k-never-refused")
