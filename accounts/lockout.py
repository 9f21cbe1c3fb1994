"""Brute-force protection: failed logins per (username, client address) in the Django cache.

After LOGIN_FAILURE_LIMIT failures within LOGIN_LOCKOUT_SECONDS, that pair is locked out for
LOGIN_LOCKOUT_SECONDS — even the right password is refused until then. Counting per pair (not per
account) means an attacker cannot lock a real user out from another address.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache


def _pair(username: str, source_ip: str | None) -> str:
    raw = f"{username.strip().casefold()}|{source_ip or '-'}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _failures_key(username: str, source_ip: str | None) -> str:
    return f"accounts:login-failures:{_pair(username, source_ip)}"


def _lock_key(username: str, source_ip: str | None) -> str:
    return f"accounts:login-lock:{_pair(username, source_ip)}"


def seconds_remaining(username: str, source_ip: str | None) -> int:
    """Seconds until the pair may try again; 0 when it is not locked out."""
    until = cache.get(_lock_key(username, source_ip))
    if until is None:
        return 0
    return max(0, math.ceil(float(until) - time.time()))


def count_failure(username: str, source_ip: str | None) -> tuple[int, bool]:
    """Count one failure; returns (failures so far, whether this failure started a lockout)."""
    key = _failures_key(username, source_ip)
    window = settings.LOGIN_LOCKOUT_SECONDS
    cache.add(key, 0, timeout=window)
    try:
        failures = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=window)
        failures = 1
    if failures >= settings.LOGIN_FAILURE_LIMIT:
        cache.set(_lock_key(username, source_ip), time.time() + window, timeout=window)
        cache.delete(key)
        return failures, True
    return failures, False


def clear(username: str, source_ip: str | None) -> None:
    cache.delete_many([_failures_key(username, source_ip), _lock_key(username, source_ip)])


def lockout_message(seconds: int) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    unit = "minute" if minutes == 1 else "minutes"
    return f"Too many failed attempts; try again in {minutes} {unit}."
