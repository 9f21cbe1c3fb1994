"""Error budgets and multiwindow, multi-burn-rate alerting (PURE).

After Google's SRE workbook, "Alerting on SLOs" (approach 6): an alert needs its burn rate above the
threshold over a long window AND over a short one (the short window, 1/12 of the long, makes it resolve
soon after the burning stops). The workbook's thresholds are for a 30-day window; here each rule keeps
the workbook's share of the budget spent within its long window, so the burn rate that spends that share
scales with the compliance window (``burn = share × window / long window``): 14.4 / 6 / 1 at 30 days,
13.44 / 5.6 / 0.933 at 28 days.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Severity = Literal["page", "ticket"]
Decision = Literal["fire", "resolve"]
BudgetColour = Literal["ok", "warn", "bad", "unknown"]

HOUR = 3600.0
MINUTE = 60.0


@dataclass(frozen=True)
class Rule:
    """Fire when the burn rate is at least ``burn`` over ``long_s`` AND over ``short_s``."""

    severity: Severity
    budget_share: float  # the share of the whole budget spent within long_s at this burn rate
    long_s: float
    short_s: float
    burn: float

    @property
    def name(self) -> str:
        return f"{self.severity} {_span(self.long_s)}/{_span(self.short_s)}"


# (severity, share of the budget spent in the long window, long window, short window): the workbook's.
RULE_SHAPES: tuple[tuple[Severity, float, float, float], ...] = (
    ("page", 0.02, 1 * HOUR, 5 * MINUTE),
    ("page", 0.05, 6 * HOUR, 30 * MINUTE),
    ("ticket", 0.10, 72 * HOUR, 6 * HOUR),
)


def _span(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g} d"
    if seconds >= HOUR:
        return f"{seconds / HOUR:g} h"
    return f"{seconds / MINUTE:g} m"


def rules_for(window_days: int) -> tuple[Rule, ...]:
    """The alert rules of an SLO with a compliance window of ``window_days`` days."""
    if window_days <= 0:
        raise ValueError("window_days must be positive")
    window_s = window_days * 86400.0
    return tuple(
        Rule(severity=sev, budget_share=share, long_s=long_s, short_s=short_s, burn=share * window_s / long_s)
        for sev, share, long_s, short_s in RULE_SHAPES
    )


def windows_of(rules: tuple[Rule, ...]) -> tuple[float, ...]:
    """Every window the rules read, shortest first (each is summed once)."""
    return tuple(sorted({w for r in rules for w in (r.long_s, r.short_s)}))


def error_budget(objective: float) -> float:
    """The share of events allowed to be bad: 0.01 for a 99 % objective."""
    if not 0.0 < objective < 1.0:
        raise ValueError("objective must be between 0 and 1 (exclusive)")
    return 1.0 - objective


def burn_rate(good: float, total: float, objective: float) -> float | None:
    """How fast the budget burns: the bad share over the allowed share (1.0 spends exactly the budget
    over the window). None with no events (no data is not a burn)."""
    if total <= 0:
        return None
    bad = max(0.0, total - good)
    return (bad / total) / error_budget(objective)


def budget_remaining(good: float, total: float, objective: float) -> float | None:
    """The share of the window's budget left: 1.0 untouched, 0.0 spent, negative overspent. The budget
    is the objective's allowance of the events seen so far in the window. None with no events."""
    if total <= 0:
        return None
    allowed = error_budget(objective) * total
    bad = max(0.0, total - good)
    return 1.0 - bad / allowed


def rule_holds(rule: Rule, rates: dict[float, float | None]) -> bool:
    """Both windows burn at least at the rule's rate."""
    long_rate, short_rate = rates.get(rule.long_s), rates.get(rule.short_s)
    if long_rate is None or short_rate is None:
        return False
    return long_rate >= rule.burn and short_rate >= rule.burn


def severity_holds(rules: tuple[Rule, ...], rates: dict[float, float | None]) -> dict[Severity, Rule | None]:
    """Per severity, the first rule that holds (or None)."""
    out: dict[Severity, Rule | None] = {"page": None, "ticket": None}
    for rule in rules:
        if out[rule.severity] is None and rule_holds(rule, rates):
            out[rule.severity] = rule
    return out


def decide(*, firing: bool, holds: bool) -> Decision | None:
    """An alert fires when its condition starts to hold and resolves when it stops."""
    if holds and not firing:
        return "fire"
    if firing and not holds:
        return "resolve"
    return None


def budget_colour(remaining: float | None) -> BudgetColour:
    """Green above 25 % left, amber above 0, red when spent."""
    if remaining is None:
        return "unknown"
    if remaining > 0.25:
        return "ok"
    if remaining > 0.0:
        return "warn"
    return "bad"


MAX_ATTEMPTS = 6
BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 600.0


def backoff_seconds(attempt: int, *, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """The wait after failed attempt number ``attempt`` (1-based): base, 2×base, 4×base... at most cap."""
    if attempt < 1:
        raise ValueError("attempt starts at 1")
    return min(cap, base * math.pow(2, attempt - 1))


def good_at_most(buckets: list[tuple[float, float]], threshold_s: float) -> tuple[float, float]:
    """(events ≤ threshold, all events) from cumulative histogram buckets ``[(le, count), ...]``; a
    threshold between two bounds counts the bucket's share linearly, as ``histogram_quantile`` does."""
    if not buckets:
        return 0.0, 0.0
    total = buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if le == threshold_s or (le > threshold_s and math.isinf(le)):
            return (count if le == threshold_s else below), total
        if le > threshold_s:
            width = le - lower
            share = (threshold_s - lower) / width if width > 0 else 0.0
            return below + (count - below) * share, total
        lower, below = le, count
    return total, total
