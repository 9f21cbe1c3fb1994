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

from keys.records import KeyRecord

ACQUIRE_LUA = r"""
local gen = redis.call('GET', KEYS[1]) or 'none'
if gen ~= ARGV[1] then return {'stale', gen} end
local now = tonumber(ARGV[2])
local stale_before = now - tonumber(ARGV[4])
local function num(key) return tonumber(redis.call('GET', key) or '0') end
local checks = {
  {'requests_per_minute', KEYS[2], ARGV[5]},
  {'tokens_per_minute', KEYS[3], ARGV[6]},
  {'requests_per_day', KEYS[5], ARGV[8]},
  {'requests_per_month', KEYS[6], ARGV[9]},
  {'tokens_per_day', KEYS[7], ARGV[10]},
  {'tokens_per_month', KEYS[8], ARGV[11]},
}
for _, c in ipairs(checks) do
  local limit = tonumber(c[3])
  if limit >= 0 then
    local used = num(c[2])
    if used >= limit then
      redis.call('HINCRBY', KEYS[9], 'denied', 1)
      redis.call('EXPIRE', KEYS[9], 691200)
      redis.call('SADD', KEYS[12], ARGV[16])
      return {'limit', c[1], tostring(used), tostring(limit)}
    end
  end
end
local conc = tonumber(ARGV[7])
if conc >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', stale_before)
  local held = redis.call('ZCARD', KEYS[4])
  if held >= conc then
    redis.call('HINCRBY', KEYS[9], 'denied', 1)
    redis.call('EXPIRE', KEYS[9], 691200)
    redis.call('SADD', KEYS[12], ARGV[16])
    return {'limit', 'max_concurrent', tostring(held), tostring(conc)}
  end
  redis.call('ZADD', KEYS[4], now, ARGV[3])
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[4]) + 60)
end
local crossed = {}
local function count(key, ttl, limit, label)
  local after = redis.call('INCR', key)
  if after == 1 then redis.call('EXPIRE', key, ttl) end
  limit = tonumber(limit)
  if limit > 0 then
    for pct in string.gmatch(ARGV[12], '%d+') do
      local t = tonumber(pct)
      if after * 100 >= t * limit and (after - 1) * 100 < t * limit then
        if redis.call('SADD', KEYS[11], label .. ':' .. pct) == 1 then
          table.insert(crossed, label .. ':' .. pct)
        end
      end
    end
  end
end
count(KEYS[2], 120, '-1', 'rpm')
count(KEYS[5], 172800, ARGV[8], ARGV[13])
count(KEYS[6], 3456000, ARGV[9], ARGV[14])
redis.call('EXPIRE', KEYS[11], 3456000)
redis.call('HINCRBY', KEYS[9], 'requests', 1)
redis.call('EXPIRE', KEYS[9], 691200)
redis.call('HSET', KEYS[10], 't', ARGV[2], 'ip', ARGV[15])
redis.call('SADD', KEYS[12], ARGV[16])
table.insert(crossed, 1, 'ok')
return crossed
"""

SETTLE_LUA = r"""
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[1], ARGV[1]) end
local tokens = tonumber(ARGV[2])
local crossed = {'ok'}
if tokens > 0 then
  local function add(key, ttl, limit, label)
    local after = redis.call('INCRBY', key, tokens)
    if after == tokens then redis.call('EXPIRE', key, ttl) end
    limit = tonumber(limit)
    if limit > 0 then
      for pct in string.gmatch(ARGV[7], '%d+') do
        local t = tonumber(pct)
        if after * 100 >= t * limit and (after - tokens) * 100 < t * limit then
          if redis.call('SADD', KEYS[6], label .. ':' .. pct) == 1 then
            table.insert(crossed, label .. ':' .. pct)
          end
        end
      end
    end
  end
  add(KEYS[2], 120, '-1', 'tpm')
  add(KEYS[3], 172800, ARGV[3], ARGV[5])
  add(KEYS[4], 3456000, ARGV[4], ARGV[6])
  redis.call('EXPIRE', KEYS[6], 3456000)
  redis.call('HINCRBY', KEYS[5], 'tokens', tokens)
  redis.call('EXPIRE', KEYS[5], 691200)
  redis.call('SADD', KEYS[7], ARGV[8])
end
return crossed
"""

# A concurrency slot whose request never released it (a killed process) frees itself after this.
SLOT_STALE_SECONDS = 600


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


@dataclass(frozen=True)
class Stale:
    generation: str


@dataclass(frozen=True)
class OverLimit:
    limit: str
    used: int
    allowed: int
    resets_at: datetime

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


def _scripts() -> tuple[object, object]:
    scripts = getattr(_local, "scripts", None)
    if scripts is None or scripts[0] is not client():
        r = client()
        scripts = (r, r.register_script(ACQUIRE_LUA), r.register_script(SETTLE_LUA))
        _local.scripts = scripts
    return scripts[1], scripts[2]


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
    record: KeyRecord, *, slot: str, source_ip: str | None, now: datetime
) -> tuple[list[str], list[str]]:
    """The keys and arguments of the acquire script for one request (shared by the sync and async paths)."""
    w = Windows.at(now)
    kid = record.key_id
    lim = record.limits
    keys = [
        generation_key(kid),
        counter_key(kid, "rpm", w.minute),
        counter_key(kid, "tpm", w.minute),
        counter_key(kid, "conc", "slots"),
        counter_key(kid, "rd", w.day),
        counter_key(kid, "rm", w.month),
        counter_key(kid, "td", w.day),
        counter_key(kid, "tm", w.month),
        usage_key(kid, w.hour),
        last_used_key(kid),
        counter_key(kid, "alerts", "fired"),
        dirty_key(),
    ]
    args = [
        record.generation,
        f"{now.timestamp():.6f}",
        slot,
        str(SLOT_STALE_SECONDS),
        _limit_arg(lim.requests_per_minute),
        _limit_arg(lim.tokens_per_minute),
        _limit_arg(lim.max_concurrent),
        _limit_arg(lim.requests_per_day),
        _limit_arg(lim.requests_per_month),
        _limit_arg(lim.tokens_per_day),
        _limit_arg(lim.tokens_per_month),
        ",".join(str(t) for t in lim.alert_thresholds),
        f"requests_per_day:{w.day}",
        f"requests_per_month:{w.month}",
        source_ip or "",
        kid,
    ]
    return keys, args


def acquire_outcome(
    record: KeyRecord, raw: list[Any], *, slot: str, now: datetime
) -> Acquired | Stale | OverLimit:
    reply = [part.decode() if isinstance(part, bytes) else str(part) for part in raw]
    if reply[0] == "stale":
        return Stale(generation=reply[1])
    if reply[0] == "limit":
        return OverLimit(
            limit=reply[1], used=int(reply[2]), allowed=int(reply[3]), resets_at=reset_time(reply[1], now)
        )
    return Acquired(slot=slot if record.limits.max_concurrent is not None else "", crossed=tuple(reply[1:]))


def acquire(
    record: KeyRecord, *, slot: str, source_ip: str | None, now: datetime
) -> Acquired | Stale | OverLimit:
    acquire_script, _ = _scripts()
    keys, args = acquire_call(record, slot=slot, source_ip=source_ip, now=now)
    return acquire_outcome(record, acquire_script(keys, args), slot=slot, now=now)  # type: ignore[operator]


def settle_call(record: KeyRecord, *, slot: str, tokens: int, now: datetime) -> tuple[list[str], list[str]]:
    w = Windows.at(now)
    kid = record.key_id
    keys = [
        counter_key(kid, "conc", "slots"),
        counter_key(kid, "tpm", w.minute),
        counter_key(kid, "td", w.day),
        counter_key(kid, "tm", w.month),
        usage_key(kid, w.hour),
        counter_key(kid, "alerts", "fired"),
        dirty_key(),
    ]
    args = [
        slot,
        str(max(0, tokens)),
        _limit_arg(record.limits.tokens_per_day),
        _limit_arg(record.limits.tokens_per_month),
        f"tokens_per_day:{w.day}",
        f"tokens_per_month:{w.month}",
        ",".join(str(t) for t in record.limits.alert_thresholds),
        kid,
    ]
    return keys, args


def settle(record: KeyRecord, *, slot: str, tokens: int = 0, now: datetime | None = None) -> tuple[str, ...]:
    """Release the request's concurrency slot and charge the tokens it used; returns crossed thresholds."""
    if not slot and tokens <= 0:
        return ()
    _, settle_script = _scripts()
    keys, args = settle_call(record, slot=slot, tokens=tokens, now=now or datetime.now(UTC))
    reply = settle_script(keys, args)  # type: ignore[operator]
    return tuple(part.decode() if isinstance(part, bytes) else str(part) for part in reply[1:])


def current_usage(key_id: str, now: datetime) -> dict[str, int]:
    """Counters of the windows in force now, for pages and the API (one pipelined round trip)."""
    w = Windows.at(now)
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
    pipe.zcount(counter_key(key_id, "conc", "slots"), now.timestamp() - SLOT_STALE_SECONDS, "+inf")
    values = pipe.execute()
    usage = {name: int(value or 0) for name, value in zip(names, values[:-1], strict=True)}
    usage["in_flight"] = int(values[-1] or 0)
    return usage


def now_utc() -> datetime:
    return datetime.fromtimestamp(time.time(), UTC)
