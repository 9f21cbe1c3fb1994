"""Rate limits, concurrency and quotas, counted in Redis with one atomic script per request.

One EVALSHA does everything a request needs: it checks that the caller's cached view of the key is
current (the key's generation, bumped on every change, so revocation never waits for a cache), checks
every limit, and only if all pass counts the request, takes a concurrency slot, records usage for the
hourly roll-up and the last use, and reports which budget thresholds this request crossed (once per
window, whatever the number of processes). Every web process and worker shares the same counters, so
N processes never multiply a limit.
"""

from __future__ import annotations

import calendar
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.conf import settings

from keys.limit_scripts import ACQUIRE_LUA, RENEW_LUA, SETTLE_LUA
from keys.records import KeyRecord

# A concurrency slot is a lease of this many seconds, renewed by the gateway every third of it while
# the request is alive: only a slot whose process died (and stopped renewing) frees itself.
SLOT_LEASE_SECONDS = 60


@dataclass(frozen=True)
class Windows:
    minute: str
    day: str
    month: str
    hour: str

    @classmethod
    def at(cls, when: datetime) -> Windows:
        return cls(
            minute=when.strftime("%Y%m%d%H%M"),
            day=when.strftime("%Y%m%d"),
            month=when.strftime("%Y%m"),
            hour=when.strftime("%Y%m%d%H"),
        )


def reset_time(limit: str, now: datetime) -> datetime:
    """When the window of `limit` starts again (UTC)."""
    if limit.endswith("_minute"):
        return now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    if limit.endswith("_day"):
        return now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    if limit.endswith("_month"):
        days = calendar.monthrange(now.year, now.month)[1]
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        return start + timedelta(days=days)
    return now + timedelta(seconds=1)  # max_concurrent: a slot frees when a request ends


@dataclass(frozen=True)
class Acquired:
    slot: str
    crossed: tuple[str, ...]
    reserved: int = 0  # tokens reserved at admission, taken back when the request settles
    windows: tuple[str, str, str] = ("", "", "")  # the minute, day and month (Redis's clock) they sit in


@dataclass(frozen=True)
class Stale:
    generation: str


@dataclass(frozen=True)
class OverLimit:
    limit: str
    used: int
    allowed: int
    resets_at: datetime
    needed: int = 1  # what this request would have added (its token reservation, or one request)

    @property
    def retry_after(self) -> int:
        return seconds_until(self.resets_at)

    def details(self) -> dict[str, object]:
        """What a 429 body says about the limit, for programs: see :func:`limit_details`."""
        return limit_details(self.limit, value=self.allowed, used=self.used, resets_at=self.resets_at)


def seconds_until(when: datetime) -> int:
    """Whole seconds to wait until `when` (at least 1): the `Retry-After` of a refusal."""
    return max(1, int((when - datetime.now(UTC)).total_seconds() + 0.999))


def iso_utc(when: datetime) -> str:
    """ISO 8601 in UTC with a `Z`, as the API writes every time: 2026-12-02T00:00:00Z."""
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def limit_details(name: str, *, value: int, used: int, resets_at: datetime) -> dict[str, object]:
    """The machine-readable part of an over-limit answer (REST `error.limit`, gateway `error.limit`).

    `name` is the limit (`requests_per_minute`, `tokens_per_day`, `max_concurrent`, ...), `value` what it
    allows, `used` what was counted when the request was refused, `resets_at` when its window starts
    again (for `max_concurrent`: the earliest a slot may be free) and `retry_after` the seconds until
    then, the same number as the `Retry-After` header.
    """
    return {
        "name": name,
        "value": value,
        "used": used,
        "resets_at": iso_utc(resets_at),
        "retry_after": seconds_until(resets_at),
    }


_local = threading.local()
_client_lock = threading.Lock()
_client: redis.Redis | None = None


def client() -> redis.Redis:
    """One pooled client per process, with deadlines so a hung Redis fails a request instead of hanging it."""
    global _client
    if _client is None:
        with _client_lock:
            if _client is None:
                _client = redis.Redis.from_url(
                    settings.REDIS_URL,
                    socket_connect_timeout=settings.KEYS_REDIS_TIMEOUT_SECONDS,
                    socket_timeout=settings.KEYS_REDIS_TIMEOUT_SECONDS,
                    health_check_interval=30,
                )
    return _client


def _prefix() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'tandem')}:keys"


def generation_key(key_id: str) -> str:
    return f"{_prefix()}:{key_id}:gen"


def dirty_key() -> str:
    return f"{_prefix()}:dirty"


def usage_key(key_id: str, hour: str) -> str:
    return f"{_prefix()}:{key_id}:u:{hour}"


def last_used_key(key_id: str) -> str:
    return f"{_prefix()}:{key_id}:last"


def counter_key(key_id: str, name: str, window: str) -> str:
    return f"{_prefix()}:{key_id}:{name}:{window}"


def key_base(key_id: str) -> str:
    """The start of every counter's name of a key; the scripts add `:<counter>:<window>`."""
    return f"{_prefix()}:{key_id}"


def _scripts() -> tuple[Any, Any, Any]:
    scripts = getattr(_local, "scripts", None)
    if scripts is None or scripts[0] is not client():
        r = client()
        scripts = (
            r,
            r.register_script(ACQUIRE_LUA),
            r.register_script(SETTLE_LUA),
            r.register_script(RENEW_LUA),
        )
        _local.scripts = scripts
    return scripts[1], scripts[2], scripts[3]


def _limit_arg(value: int | None) -> str:
    return "-1" if value is None else str(value)


def current_generation(key_id: str) -> str:
    value: Any = client().get(generation_key(key_id))
    return value.decode() if isinstance(value, bytes) else str(value or "none")


def bump_generation(key_ids: list[str]) -> None:
    """Make every process's cached view of these keys stale (called on every change, and after commit)."""
    if not key_ids:
        return
    import secrets

    pipe = client().pipeline(transaction=False)
    for key_id in key_ids:
        pipe.set(generation_key(key_id), secrets.token_hex(8))
    pipe.execute()


def acquire_call(
    record: KeyRecord, *, slot: str, source_ip: str | None, reserve: int = 0
) -> tuple[list[str], list[str]]:
    """The keys and arguments of the acquire script for one request (shared by the sync and async paths).

    `reserve` is the most tokens the request may cost (prompt estimate + its output cap), held against
    the token limits until it settles. The windows are Redis's, chosen inside the script.
    """
    kid = record.key_id
    lim = record.limits
    keys = [
        generation_key(kid),
        counter_key(kid, "conc", "slots"),
        counter_key(kid, "alerts", "fired"),
        dirty_key(),
        last_used_key(kid),
    ]
    args = [
        record.generation,
        slot,
        str(SLOT_LEASE_SECONDS),
        _limit_arg(lim.requests_per_minute),
        _limit_arg(lim.tokens_per_minute),
        _limit_arg(lim.max_concurrent),
        _limit_arg(lim.requests_per_day),
        _limit_arg(lim.requests_per_month),
        _limit_arg(lim.tokens_per_day),
        _limit_arg(lim.tokens_per_month),
        ",".join(str(t) for t in lim.alert_thresholds),
        source_ip or "",
        kid,
        key_base(kid),
        str(max(0, reserve) if has_token_limit(record) else 0),
    ]
    return keys, args


def has_token_limit(record: KeyRecord) -> bool:
    lim = record.limits
    return any(v is not None for v in (lim.tokens_per_minute, lim.tokens_per_day, lim.tokens_per_month))


def _text(raw: list[Any]) -> list[str]:
    return [part.decode() if isinstance(part, bytes) else str(part) for part in raw]


def redis_time(stamp: str) -> datetime:
    return datetime.fromtimestamp(float(stamp), UTC)


def acquire_outcome(
    record: KeyRecord, raw: list[Any], *, slot: str, reserve: int = 0
) -> Acquired | Stale | OverLimit:
    reply = _text(raw)
    if reply[0] == "stale":
        return Stale(generation=reply[1])
    if reply[0] == "limit":
        return OverLimit(
            limit=reply[1],
            used=int(reply[2]),
            allowed=int(reply[3]),
            resets_at=reset_time(reply[1], redis_time(reply[4])),
            needed=int(reply[5]),
        )
    reserved = max(0, reserve) if has_token_limit(record) else 0
    return Acquired(
        slot=slot if record.limits.max_concurrent is not None else "",
        crossed=tuple(reply[5:]),
        reserved=reserved,
        windows=(reply[2], reply[3], reply[4]),
    )


def acquire(
    record: KeyRecord, *, slot: str, source_ip: str | None, reserve: int = 0
) -> Acquired | Stale | OverLimit:
    acquire_script, _, _ = _scripts()
    keys, args = acquire_call(record, slot=slot, source_ip=source_ip, reserve=reserve)
    return acquire_outcome(record, acquire_script(keys, args), slot=slot, reserve=reserve)


def settle_call(
    record: KeyRecord,
    *,
    slot: str,
    tokens: int,
    reserved: int = 0,
    windows: tuple[str, str, str] = ("", "", ""),
) -> tuple[list[str], list[str]]:
    kid = record.key_id
    keys = [counter_key(kid, "conc", "slots"), counter_key(kid, "alerts", "fired"), dirty_key()]
    args = [
        slot,
        str(max(0, tokens)),
        _limit_arg(record.limits.tokens_per_day),
        _limit_arg(record.limits.tokens_per_month),
        ",".join(str(t) for t in record.limits.alert_thresholds),
        kid,
        key_base(kid),
        str(max(0, reserved)),
        *windows,
    ]
    return keys, args


def settle(
    record: KeyRecord,
    *,
    slot: str,
    tokens: int = 0,
    reserved: int = 0,
    windows: tuple[str, str, str] = ("", "", ""),
) -> tuple[str, ...]:
    """Release the request's slot, take back its reservation and charge the tokens it used; returns
    the budget thresholds crossed."""
    if not slot and tokens <= 0 and reserved <= 0:
        return ()
    _, settle_script, _ = _scripts()
    keys, args = settle_call(record, slot=slot, tokens=tokens, reserved=reserved, windows=windows)
    return tuple(_text(settle_script(keys, args))[1:])


def renew(record: KeyRecord, *, slot: str) -> bool:
    """Extend a live request's concurrency lease by SLOT_LEASE_SECONDS (False when it was gone)."""
    _, _, renew_script = _scripts()
    return bool(renew_script([counter_key(record.key_id, "conc", "slots")], [slot, str(SLOT_LEASE_SECONDS)]))


def redis_now() -> datetime:
    """Redis's clock: the one every window is counted by."""
    reply: Any = client().time()
    seconds, micros = reply
    return datetime.fromtimestamp(seconds + micros / 1_000_000, UTC)


def current_usage(key_id: str, now: datetime | None = None) -> dict[str, int]:
    """Counters of the windows in force now by Redis's clock, for pages and the API (two round trips).

    Token counters include what requests in flight have reserved and not yet settled."""
    when = redis_now()
    w = Windows.at(when)
    names = {
        "requests_this_minute": counter_key(key_id, "rpm", w.minute),
        "tokens_this_minute": counter_key(key_id, "tpm", w.minute),
        "requests_today": counter_key(key_id, "rd", w.day),
        "requests_this_month": counter_key(key_id, "rm", w.month),
        "tokens_today": counter_key(key_id, "td", w.day),
        "tokens_this_month": counter_key(key_id, "tm", w.month),
    }
    r = client()
    pipe = r.pipeline(transaction=False)
    for key in names.values():
        pipe.get(key)
    pipe.zcount(counter_key(key_id, "conc", "slots"), when.timestamp(), "+inf")
    values = pipe.execute()
    usage = {name: max(0, int(value or 0)) for name, value in zip(names, values[:-1], strict=True)}
    usage["in_flight"] = int(values[-1] or 0)
    return usage


def now_utc() -> datetime:
    return datetime.fromtimestamp(time.time(), UTC)
