"""How a key reads on a page: status colour, expiry countdown, quota bars, the usage sparkline (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

STATUS_CLASS = {
    "active": "state-ok",
    "expired": "state-stale",
    "revoked": "state-bad",
    "exhausted": "state-warn",
    "unknown": "state-unknown",
}
STATUS_LABEL = {"unknown": "unknown: Redis unreachable"}
STATUS_HINT = {
    "active": "Accepted now.",
    "expired": "Past its expiry: refused. Create a new key.",
    "revoked": "Revoked: refused everywhere. Create a new key.",
    "exhausted": "A quota is used up: refused until it resets.",
    "unknown": "Redis is unreachable, so this key's usage cannot be read: whether a limit is used up is "
    "unknown. The gateway serves it within a share of each limit per process until Redis is back.",
}
QUOTA_LABELS = {
    "requests_per_day": ("requests today", "requests_today"),
    "requests_per_month": ("requests this month", "requests_this_month"),
    "tokens_per_day": ("tokens today", "tokens_today"),
    "tokens_per_month": ("tokens this month", "tokens_this_month"),
}
RATE_LABELS = {
    "requests_per_minute": ("requests this minute", "requests_this_minute"),
    "tokens_per_minute": ("tokens this minute", "tokens_this_minute"),
    "max_concurrent": ("requests in flight", "in_flight"),
}
SOON = timedelta(days=3)


@dataclass(frozen=True)
class Meter:
    label: str
    used: int
    allowed: int | None

    @property
    def percent(self) -> int:
        if not self.allowed:
            return 100 if self.allowed == 0 else 0
        return min(100, round(100 * self.used / self.allowed))

    @property
    def level(self) -> str:
        """ok below 80 %, warn from 80 %, bad at the limit (the default alert thresholds)."""
        if self.allowed is None:
            return "ok"
        if self.percent >= 100:
            return "bad"
        return "warn" if self.percent >= 80 else "ok"


def meters(
    limits: dict[str, int | None], usage: dict[str, int], labels: dict[str, tuple[str, str]]
) -> list[Meter]:
    """One meter per limit that is set, in the order of `labels`."""
    return [
        Meter(label=label, used=int(usage.get(counter, 0)), allowed=limits[name])
        for name, (label, counter) in labels.items()
        if limits.get(name) is not None
    ]


def fullest(found: list[Meter]) -> Meter | None:
    return max(found, key=lambda m: m.percent) if found else None


@dataclass(frozen=True)
class Expiry:
    text: str
    level: str  # ok, warn (within three days), bad (past)


def expiry(expires_at: datetime, now: datetime) -> Expiry:
    left = expires_at - now
    if left <= timedelta(0):
        return Expiry(f"expired {_span(-left)} ago", "bad")
    return Expiry(f"expires in {_span(left)}", "warn" if left <= SOON else "ok")


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days >= 2:
        # Nearest whole day: a 7-day key read a few seconds after it was made expires "in 7 days".
        return f"{round(delta.total_seconds() / 86400)} days"
    if days == 1:
        return f"1 day {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{max(minutes, 1)} min"


def hourly_series(rows: list[tuple[datetime, int]], *, end: datetime, hours: int) -> list[int]:
    """Values per hour for the `hours` hours up to `end` (the hour holding `end` last); gaps are 0."""
    last = end.replace(minute=0, second=0, microsecond=0)
    first = last - timedelta(hours=hours - 1)
    values = [0] * hours
    for hour, value in rows:
        index = int((hour - first).total_seconds() // 3600)
        if 0 <= index < hours:
            values[index] += int(value)
    return values


def fitted_hours(first: datetime | None, *, end: datetime, window: int, minimum: int) -> int:
    """Hours the usage chart spans: from the first hour with usage in the window (a young or newly
    busy key fills the chart instead of being one bar at its right edge), at least `minimum`, at most
    the whole `window`."""
    if first is None:
        return window
    last = end.replace(minute=0, second=0, microsecond=0)
    span = int((last - first.replace(minute=0, second=0, microsecond=0)).total_seconds() // 3600) + 1
    return max(minimum, min(window, span))


def hour_starts(*, end: datetime, hours: int) -> list[int]:
    """Unix times of the `hours` hour starts up to the one holding `end` (the x values of hourly_series)."""
    last = end.replace(minute=0, second=0, microsecond=0)
    return [int((last - timedelta(hours=hours - 1 - i)).timestamp()) for i in range(hours)]


def sparkline_points(values: list[int], *, width: int = 96, height: int = 24, pad: int = 2) -> str:
    """The `points` of an SVG polyline; a flat line along the bottom when nothing happened."""
    if not values:
        return ""
    top = max(values) or 1
    step = (width - 2 * pad) / max(len(values) - 1, 1)
    span = height - 2 * pad
    return " ".join(f"{pad + i * step:.1f},{pad + span - span * v / top:.1f}" for i, v in enumerate(values))


def parse_list(text: str) -> list[str]:
    """Comma-, space- or newline-separated entries, blanks dropped."""
    return [part for part in text.replace(",", " ").split() if part]


def parse_percentages(text: str) -> list[int] | None:
    """'80, 95' -> [80, 95]; None when an entry is not a whole number."""
    found = []
    for part in parse_list(text.replace("%", " ")):
        if not part.isascii() or not part.isdigit():
            return None
        found.append(int(part))
    return found


@dataclass(frozen=True)
class KeyRow:
    """One key as the list and the key page show it."""

    key: object
    status: str
    status_label: str
    status_class: str
    status_hint: str
    expiry: Expiry
    quotas: list[Meter]
    rates: list[Meter]
    busiest: Meter | None
    sparkline: str
    requests_24h: int
    exhausted: list[ExhaustedNote]


@dataclass(frozen=True)
class ExhaustedNote:
    """'requests per day used up (1000 of 1000)' and when it resets (the page shows it in local time)."""

    text: str
    resets_at: datetime


def exhausted_notes(exhausted: list[dict[str, object]]) -> list[ExhaustedNote]:
    notes = []
    for entry in exhausted:
        quota = str(entry["quota"]).replace("_", " ")
        notes.append(
            ExhaustedNote(
                text=f"{quota} used up ({entry['used']} of {entry['allowed']})",
                resets_at=datetime.fromisoformat(str(entry["resets_at"])),
            )
        )
    return notes


def key_row(
    *,
    key: object,
    status: str,
    usage: dict[str, int],
    exhausted: list[dict[str, object]],
    limits: dict[str, int | None],
    expires_at: datetime,
    hourly: list[tuple[datetime, int]],
    now: datetime,
) -> KeyRow:
    series = hourly_series(hourly, end=now, hours=24)
    quotas = meters(limits, usage, QUOTA_LABELS)
    return KeyRow(
        key=key,
        status=status,
        status_label=STATUS_LABEL.get(status, status),
        status_class=STATUS_CLASS.get(status, "state-unknown"),
        status_hint=STATUS_HINT.get(status, ""),
        expiry=expiry(expires_at, now),
        quotas=quotas,
        rates=meters(limits, usage, RATE_LABELS),
        busiest=fullest(quotas),
        sparkline=sparkline_points(series),
        requests_24h=sum(series),
        exhausted=exhausted_notes(exhausted),
    )
