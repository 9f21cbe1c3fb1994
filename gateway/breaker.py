"""A circuit breaker per topology: closed, open, half-open with one trial at a time (pure, per process).

Closed: the cluster is used; ``failures`` consecutive failures open it. Open: the cluster is skipped
(fallback or a clear 503) for ``open_seconds``; then half-open: one request at a time goes to the
cluster as a trial, a success closes the breaker, a failure opens it again.

Every request the breaker lets through gets a ``Ticket``, and must end it exactly once: ``success``,
``failure`` or ``release`` (neither: the client went away, or an unexpected error; the dispatch does
this in a ``finally``). A release frees the half-open trial slot, so the breaker never wedges
half-open. The ticket carries the breaker's ``generation``, which moves on every change of state: an
answer to a request let through before the last change (a slow success that started before the
breaker opened, a late failure after it closed) is old news and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


@dataclass(frozen=True)
class Ticket:
    """A request let through: the generation it was let through in, and whether it is the trial."""

    generation: int
    trial: bool = False


@dataclass
class Breaker:
    failures_to_open: int = 3
    open_seconds: float = 15.0
    state: str = CLOSED
    failures: int = 0
    opened_at: float = 0.0
    trial_in_flight: bool = False
    last_reason: str = ""
    generation: int = 0

    def _move(self, state: str) -> str:
        self.state = state
        self.generation += 1
        return state

    def allow(self, now: float) -> tuple[Ticket | None, str | None]:
        """(a ticket when this request may go to the cluster, else None; the new state if this changed it)."""
        if self.state == CLOSED:
            return Ticket(self.generation), None
        if self.state == OPEN:
            if now - self.opened_at < self.open_seconds:
                return None, None
            changed = self._move(HALF_OPEN)
            self.trial_in_flight = True
            return Ticket(self.generation, trial=True), changed
        if self.trial_in_flight:
            return None, None
        self.trial_in_flight = True
        return Ticket(self.generation, trial=True), None

    def _current(self, ticket: Ticket | None) -> bool:
        return ticket is None or ticket.generation == self.generation

    def _end_trial(self, ticket: Ticket | None) -> None:
        if ticket is not None and ticket.trial and self._current(ticket):
            self.trial_in_flight = False

    def success(self, ticket: Ticket | None = None) -> str | None:
        """The cluster answered. From an older generation: nothing changes (the state moved since)."""
        if not self._current(ticket):
            return None
        self._end_trial(ticket)
        self.failures = 0
        if self.state != CLOSED:
            self.trial_in_flight = False
            self.last_reason = ""
            return self._move(CLOSED)
        return None

    def failure(self, now: float, reason: str, ticket: Ticket | None = None) -> str | None:
        """The cluster failed. ``ticket`` None: counted whatever the generation (a caller without one)."""
        if not self._current(ticket):
            return None
        self._end_trial(ticket)
        self.last_reason = reason
        if self.state == HALF_OPEN:
            self.trial_in_flight = False
            self.opened_at = now
            return self._move(OPEN)
        if self.state == OPEN:
            return None
        self.failures += 1
        if self.failures >= self.failures_to_open:
            self.opened_at = now
            self.failures = 0
            return self._move(OPEN)
        return None

    def release(self, ticket: Ticket | None = None) -> None:
        """A request that ended neither way (the client went away, an unexpected error): if it was
        the half-open trial, the next request may try."""
        if ticket is None:
            self.trial_in_flight = False
        else:
            self._end_trial(ticket)
