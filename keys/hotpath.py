"""Authenticate a token and check its limits: the code the REST API and the gateway share.

Per request, with the key cached in this process: a format and checksum check (no I/O), a dict
lookup, and one Redis round trip (:mod:`keys.limits`) that also proves the cached view is current.
Uncached: one more Redis read (the generation) and one database query, then the same script.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings

from keys import limits, tokens
from keys.records import KeyRecord

# How long a cached key is trusted without a database read even if Redis lost its generations
# (a Redis restart with data loss); every change is seen sooner, on the next request, through them.
CACHE_MAX_AGE_SECONDS = 300
CACHE_SIZE = 50_000
NEGATIVE_TTL_SECONDS = 30


class KeyRefused(Exception):
    """Why a token may not be used. ``status`` 401, 403 or 429; ``message`` tells the caller what to do."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retry_after: int | None = None,
        record: KeyRecord | None = None,
        detail: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.record = record
        self.detail = detail or {}


@dataclass
class Grant:
    """A request allowed to go on; ``settle`` it when the response is done."""

    record: KeyRecord
    slot: str
    crossed: tuple[str, ...] = field(default_factory=tuple)

    def settle(self, *, tokens_used: int = 0) -> tuple[str, ...]:
        crossed = limits.settle(self.record, slot=self.slot, tokens=tokens_used)
        self.slot = ""
        return crossed


class _Cache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[KeyRecord | None, float]] = OrderedDict()

    def get(self, digest: str) -> tuple[bool, KeyRecord | None]:
        with self._lock:
            entry = self._entries.get(digest)
            if entry is None:
                return False, None
            record, stored = entry
            max_age = CACHE_MAX_AGE_SECONDS if record is not None else NEGATIVE_TTL_SECONDS
            if time.monotonic() - stored > max_age:
                del self._entries[digest]
                return False, None
            self._entries.move_to_end(digest)
            return True, record

    def put(self, digest: str, record: KeyRecord | None) -> None:
        with self._lock:
            self._entries[digest] = (record, time.monotonic())
            self._entries.move_to_end(digest)
            while len(self._entries) > CACHE_SIZE:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


cache = _Cache()


def pepper() -> bytes:
    return settings.API_KEY_PEPPER


def _load(digest: str) -> KeyRecord | None:
    """Read the key's generation before its row, so a change that lands in between is seen as stale."""
    from keys.selectors import key_id_for_digest, key_record_for_digest

    key_id = key_id_for_digest(digest=digest)
    if key_id is None:
        return None
    return key_record_for_digest(digest=digest, generation=limits.current_generation(key_id))


def lookup(token: str) -> KeyRecord | None:
    digest = tokens.digest(token, pepper())
    found, record = cache.get(digest)
    if found:
        return record
    record = _load(digest)
    cache.put(digest, record)
    return record


def refuse_unusable(record: KeyRecord, *, kind: str, source_ip: str | None, now: datetime) -> None:
    if record.revoked_at is not None:
        raise KeyRefused(
            401,
            "key_revoked",
            f"This key was revoked at {record.revoked_at.isoformat()}; ask its owner for a new one.",
            record=record,
        )
    if not record.owner_active:
        raise KeyRefused(
            401,
            "owner_inactive",
            "This key's owner account is disabled; the key works no more.",
            record=record,
        )
    if record.expires_at <= now:
        raise KeyRefused(
            401,
            "key_expired",
            f"This key expired at {record.expires_at.isoformat()}; create or rotate a key.",
            record=record,
        )
    if record.secret_retires_at is not None and record.secret_retires_at <= now:
        raise KeyRefused(
            401,
            "secret_rotated",
            "This secret was replaced by a rotation and stopped working at "
            f"{record.secret_retires_at.isoformat()}; "
            "use the key's new secret.",
            record=record,
        )
    if record.kind != kind:
        where = (
            "the OpenAI-compatible gateway under /v1/"
            if record.kind == "inference"
            else "Tandem's REST API under /api/v1/"
        )
        want = "a management key (tdm_m_...)" if kind == "management" else "an inference key (tdm_i_...)"
        raise KeyRefused(
            401,
            "wrong_kind",
            f"This is a {record.kind} key, for {where}; this endpoint needs {want}.",
            record=record,
        )
    if not record.allows_ip(source_ip):
        raise KeyRefused(
            403,
            "source_not_allowed",
            f"This key may not be used from {source_ip or 'an unknown address'}; "
            "its owner can add the address to the key's allowed networks.",
            record=record,
        )


UNKNOWN = "This API key is not valid. Check that you copied the whole key."


def parse_or_refuse(raw: str) -> tokens.Parsed:
    try:
        return tokens.parse(raw)
    except tokens.TokenFormatError as error:
        raise KeyRefused(401, error.code, error.hint) from None


def over_limit(outcome: limits.OverLimit, record: KeyRecord) -> KeyRefused:
    details = outcome.details()
    name = outcome.limit.replace("_", " ")
    if outcome.limit.startswith("tokens_") and outcome.needed > outcome.allowed:
        return KeyRefused(
            400,
            "max_tokens_over_limit",
            f"This request may cost up to {outcome.needed} tokens (its prompt and `max_tokens`), more than "
            f"this key's {name} limit ({outcome.allowed}) allows at all: lower `max_tokens`.",
            record=record,
            detail=details,
        )
    reserved = (
        f" with this request's {outcome.needed} reserved tokens (its prompt and `max_tokens`)"
        if outcome.limit.startswith("tokens_") and outcome.needed > 1
        else ""
    )
    return KeyRefused(
        429,
        "limit_exceeded",
        f"Over this key's {name} limit ({outcome.allowed}){reserved}; "
        f"it resets at {outcome.resets_at.isoformat()}.",
        retry_after=int(str(details["retry_after"])),
        record=record,
        detail=details,
    )


def still_changing() -> KeyRefused:
    return KeyRefused(
        503, "key_changing", "This key is being changed right now; retry in a moment.", retry_after=1
    )


def _reload(token: str, generation: str) -> KeyRecord:
    from keys.selectors import key_record_for_digest

    digest = tokens.digest(token, pepper())
    fresh = key_record_for_digest(digest=digest, generation=generation)
    cache.put(digest, fresh)
    if fresh is None:
        raise KeyRefused(401, "key_unknown", UNKNOWN)
    return fresh


def authenticate(raw: str, *, kind: str, source_ip: str | None) -> Grant:
    """Check a bare token (already taken out of its header). Raises :class:`KeyRefused`."""
    parsed = parse_or_refuse(raw)
    record = lookup(parsed.token)
    if record is None:
        raise KeyRefused(401, "key_unknown", UNKNOWN)
    for _attempt in range(3):
        now = limits.now_utc()
        try:
            refuse_unusable(record, kind=kind, source_ip=source_ip, now=now)
        except KeyRefused:
            # The memory may be older than a change that made the key usable again (a longer expiry):
            # before refusing, make sure the generation still matches.
            current = limits.current_generation(record.key_id)
            if current == record.generation:
                raise
            record = _reload(parsed.token, current)
            continue
        outcome = limits.acquire(record, slot=uuid.uuid4().hex, source_ip=source_ip)
        if isinstance(outcome, limits.Stale):
            record = _reload(parsed.token, outcome.generation)
            continue
        if isinstance(outcome, limits.OverLimit):
            raise over_limit(outcome, record)
        return Grant(record=record, slot=outcome.slot, crossed=outcome.crossed)
    raise still_changing()
