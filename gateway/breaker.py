"""A circuit breaker per topology: closed, open, half-open with one trial at a time (pure, per process).

Closed: the cluster is used; ``failures`` consecutive failures open it. Open: the cluster is skipped
(fallback or a clear 503) for ``open_seconds``; then half-open: one request at a time goes to the
cluster as a trial, a success closes the breaker, a failure opens it again.
"""

from __future__ import annotations

from dataclasses import dataclass

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


@dataclass
class Breaker:
    failures_to_open: int = 3
    open_seconds: float = 15.0
    state: str = CLOSED
    failures: int = 0
    opened_at: float = 0.0
    trial_in_flight: bool = False
    last_reason: str = ""

    def allow(self, now: float) -> tuple[bool, str | None]:
        """(may this request go to the cluster, the new state if this call changed it)."""
        if self.state == CLOSED:
            return True, None
        if self.state == OPEN:
            if now - self.opened_at < self.open_seconds:
                return False, None
            self.state = HALF_OPEN
            self.trial_in_flight = True
            return True, HALF_OPEN
        if self.trial_in_flight:
            return False, None
        self.trial_in_flight = True
        return True, None

    def success(self) -> str | None:
        self.failures = 0
        self.trial_in_flight = False
        if self.state != CLOSED:
            self.state = CLOSED
            self.last_reason = ""
            return CLOSED
        return None

    def failure(self, now: float, reason: str) -> str | None:
        self.last_reason = reason
        self.trial_in_flight = False
        if self.state == HALF_OPEN:
            self.state = OPEN
            self.opened_at = now
            return OPEN
        self.failures += 1
        if self.state == CLOSED and self.failures >= self.failures_to_open:
            self.state = OPEN
            self.opened_at = now
            return OPEN
        return None

    def release(self) -> None:
        """A trial that ended neither way (the client went away): let the next one try."""
        self.trial_in_flight = False
