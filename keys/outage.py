"""Serving while Redis is unreachable: conservative limits counted in this process, reconciled later.

When a limit call to Redis fails to connect or times out, the gateway keeps serving keys it can
check from memory (or the database) instead of stopping all inference. For as long as Redis stays
away (retried at most once a second, never waited on by a request in between) each process:

- admits a key's requests within ``1/SHARE_DIVISOR`` of each of its limits (at least 1), counted
  here from the moment Redis went away; with up to ``SHARE_DIVISOR`` gateway processes the key stays
  within its limits for that time, with more it may pass them by that many shares;
- refuses at once a key that Redis last refused for a quota whose window has not reset;
- keeps a count of every request, token and refusal, and puts them into Redis's counters and the
  hourly usage record when it answers again (:func:`reconcile`), so no usage is lost. A settle that
  fails (Redis went away mid-request) is kept and run then too.

Windows while Redis is away follow this process's clock (the only one there is); budget alerts are
not raised for usage counted here. Pure bookkeeping apart from :func:`reconcile`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from keys.limits import (
    Acquired,
    OverLimit,
    Windows,
    counter_key,
    dirty_key,
    last_used_key,
    reset_time,
    usage_key,
)
from keys.records import KeyRecord

SHARE_DIVISOR = 4
RETRY_SECONDS = 1.0
TTL = {"rpm": 120, "tpm": 120, "rd": 172800, "td": 172800, "rm": 3456000, "tm": 3456000}
REQUEST_LIMITS = (("requests_per_minute", "rpm"), ("requests_per_day", "rd"), ("requests_per_month", "rm"))
TOKEN_LIMITS = (("tokens_per_minute", "tpm"), ("tokens_per_day", "td"), ("tokens_per_month", "tm"))


def share(limit: int) -> int:
    """One process's part of a limit while Redis is away (at least 1 where the limit allows any)."""
    return 0 if limit <= 0 else max(1, limit // SHARE_DIVISOR)


def window_of(counter: str, w: Windows) -> str:
    """rpm/tpm count per minute, rd/td per day, rm/tm per month."""
    if counter in ("rpm", "tpm"):
        return w.minute
    return w.day if counter in ("rd", "td") else w.month


@dataclass
class Settle:
    record: KeyRecord
    slot: str
    tokens: int
    reserved: int
    windows: tuple[str, str, str]


@dataclass
class _State:
    down_until: float = 0.0
    counts: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    pending: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    usage: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    last: dict[str, tuple[str, str]] = field(default_factory=dict)
    exhausted: dict[str, OverLimit] = field(default_factory=dict)
    settles: list[Settle] = field(default_factory=list)


_lock = threading.Lock()
state = _State()


def reset() -> None:
    global state
    with _lock:
        state = _State()


def redis_away() -> bool:
    """True while a recent failure says not to try Redis yet."""
    return time.monotonic() < state.down_until


def mark_down() -> bool:
    """Redis failed a call: not tried again for RETRY_SECONDS. True when this call found it up (the calls
    in flight when Redis went away all fail together: one of them says so)."""
    was_up = not redis_away()
    state.down_until = time.monotonic() + RETRY_SECONDS
    return was_up


def mark_up() -> None:
    state.down_until = 0.0


def has_backlog() -> bool:
    return bool(state.pending or state.usage or state.last or state.settles)


def remember_refusal(record: KeyRecord, outcome: OverLimit) -> None:
    """A quota Redis refused stays refused here while Redis is away, until its window resets."""
    if outcome.limit != "max_concurrent" and outcome.needed <= outcome.allowed:
        state.exhausted[record.key_id] = replace(outcome, needed=1)


def admit(record: KeyRecord, *, reserve: int, source_ip: str | None, now: datetime) -> Acquired | OverLimit:
    """Admit a request within this process's share of the key's limits while Redis is away."""
    lim = record.limits
    w = Windows.at(now)
    with _lock:
        seen = state.exhausted.get(record.key_id)
        if seen is not None and seen.resets_at > now:
            _count_usage(record.key_id, w, "denied", 1)
            return seen
        for name, counter in (*REQUEST_LIMITS, *TOKEN_LIMITS):
            allowed = getattr(lim, name)
            if allowed is None:
                continue
            need = 1 if counter[0] == "r" else max(1, reserve)
            used = state.counts[(record.key_id, counter, window_of(counter, w))]
            if used + need > share(allowed):
                _count_usage(record.key_id, w, "denied", 1)
                return OverLimit(
                    limit=name,
                    used=used,
                    allowed=share(allowed),
                    resets_at=reset_time(name, now),
                    needed=need,
                )
        if lim.max_concurrent is not None:
            held = state.in_flight[record.key_id]
            if held >= max(1, lim.max_concurrent // SHARE_DIVISOR):
                _count_usage(record.key_id, w, "denied", 1)
                return OverLimit(
                    limit="max_concurrent", used=held, allowed=max(1, lim.max_concurrent // SHARE_DIVISOR),
                    resets_at=reset_time("max_concurrent", now),
                )  # fmt: skip
            state.in_flight[record.key_id] = held + 1
        for _name, counter in REQUEST_LIMITS:
            key = (record.key_id, counter, window_of(counter, w))
            state.counts[key] += 1
            state.pending[key] += 1
        if reserve > 0:
            for _name, counter in TOKEN_LIMITS:
                state.counts[(record.key_id, counter, window_of(counter, w))] += reserve
        _count_usage(record.key_id, w, "requests", 1)
        state.last[record.key_id] = (f"{now.timestamp():.6f}", source_ip or "")
    slot = "local" if lim.max_concurrent is not None else ""
    return Acquired(slot=slot, crossed=(), reserved=reserve, windows=(w.minute, w.day, w.month))


def settle_here(
    record: KeyRecord, *, slot: str, tokens: int, reserved: int, windows: tuple[str, str, str]
) -> None:
    """The end of a request admitted here: free its slot, take back its reservation, count its tokens."""
    w = Windows.at(datetime.now(UTC))
    with _lock:
        if slot:
            state.in_flight[record.key_id] = max(0, state.in_flight[record.key_id] - 1)
        for (_name, counter), window in zip(TOKEN_LIMITS, windows, strict=True):
            key = (record.key_id, counter, window)
            if key in state.counts:
                state.counts[key] -= reserved
        if tokens > 0:
            for _name, counter in TOKEN_LIMITS:
                key = (record.key_id, counter, window_of(counter, w))
                state.counts[key] += tokens
                state.pending[key] += tokens
            _count_usage(record.key_id, w, "tokens", tokens)


def settle_later(entry: Settle) -> None:
    """A request admitted by Redis whose settle could not reach it: run when Redis answers again."""
    with _lock:
        state.settles.append(entry)


def _count_usage(key_id: str, w: Windows, name: str, amount: int) -> None:
    state.usage[(key_id, w.hour, name)] += amount


def take_backlog() -> tuple[
    dict[tuple[str, str, str], int], dict[tuple[str, str, str], int], dict[str, tuple[str, str]], list[Settle]
]:
    """Everything waiting for Redis, removed from here (given back by :func:`give_back` on failure)."""
    with _lock:
        taken = (dict(state.pending), dict(state.usage), dict(state.last), list(state.settles))
        state.pending.clear()
        state.usage.clear()
        state.last.clear()
        state.settles.clear()
        state.counts.clear()
        state.exhausted.clear()
    return taken


def give_back(
    pending: dict[tuple[str, str, str], int],
    usage: dict[tuple[str, str, str], int],
    last: dict[str, tuple[str, str]],
    settles: list[Settle],
) -> None:
    with _lock:
        for key, value in pending.items():
            state.pending[key] += value
        for key, value in usage.items():
            state.usage[key] += value
        for key_id, seen in last.items():
            state.last.setdefault(key_id, seen)
        state.settles[:0] = settles


def reconcile_commands(
    pending: dict[tuple[str, str, str], int],
    usage: dict[tuple[str, str, str], int],
    last: dict[str, tuple[str, str]],
) -> list[tuple[Any, ...]]:
    """The Redis commands that add what was counted here to the shared counters (pure)."""
    commands: list[tuple[Any, ...]] = []
    keys: set[str] = set()
    for (key_id, counter, window), amount in pending.items():
        name = counter_key(key_id, counter, window)
        commands += [("INCRBY", name, amount), ("EXPIRE", name, TTL[counter], "NX")]
        keys.add(key_id)
    for (key_id, hour, field_name), amount in usage.items():
        name = usage_key(key_id, hour)
        commands += [("HINCRBY", name, field_name, amount), ("EXPIRE", name, 691200)]
        keys.add(key_id)
    for key_id, (stamp, ip) in last.items():
        commands.append(("HSET", last_used_key(key_id), "t", stamp, "ip", ip))
        keys.add(key_id)
    if keys:
        commands.append(("SADD", dirty_key(), *sorted(keys)))
    return commands


async def reconcile(client: Any, settle: Any) -> int:
    """Put the backlog into Redis (one MULTI, then the deferred settles); on failure keep it for later.

    `settle` is an async callable running one deferred :class:`Settle` through the settle script."""
    pending, usage, last, settles = take_backlog()
    commands = reconcile_commands(pending, usage, last)
    try:
        if commands:
            pipe = client.pipeline(transaction=True)
            for command in commands:
                pipe.execute_command(*command)
            await pipe.execute()
    except Exception:
        give_back(pending, usage, last, settles)
        raise
    done = 0
    try:
        for entry in settles:
            await settle(entry)
            done += 1
    except Exception:
        give_back({}, {}, {}, settles[done:])
        raise
    return len(commands) + done
