"""When to retry a Kubernetes call, and how long to wait: one pure policy, tested without a network.

- 429 Too Many Requests: wait what ``Retry-After`` says (capped), else back off.
- 5xx and connection errors: capped exponential backoff with full jitter.
- 409 on an update that carried a resourceVersion: re-read the object and try again.
- Every other 4xx (validation errors above all): never retried — the same request fails the same way.
Attempts are bounded (``max_attempts`` in total, counting the first).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum


class Action(Enum):
    GIVE_UP = "give_up"
    RETRY = "retry"
    REREAD = "reread"  # read the object again, recompute the update, then retry


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    base_delay: float = 0.2
    max_delay: float = 5.0
    max_retry_after: float = 30.0


DEFAULT_POLICY = RetryPolicy()


@dataclass(frozen=True)
class Decision:
    action: Action
    delay: float = 0.0

    @property
    def retry(self) -> bool:
        return self.action is not Action.GIVE_UP


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds form; HTTP dates are rare from kube-apiserver)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(seconds, 0.0)


def backoff(attempt: int, policy: RetryPolicy = DEFAULT_POLICY, rand: random.Random | None = None) -> float:
    """Full-jitter exponential backoff for retry number ``attempt`` (1 = first retry)."""
    ceiling = min(policy.max_delay, policy.base_delay * (2 ** max(attempt - 1, 0)))
    return (rand or random).uniform(ceiling / 2, ceiling)


def decide(
    *,
    attempt: int,
    status: int | None,
    retry_after: str | None = None,
    connection_error: bool = False,
    is_update: bool = False,
    policy: RetryPolicy = DEFAULT_POLICY,
    rand: random.Random | None = None,
) -> Decision:
    """What to do after attempt number ``attempt`` (1-based) ended with ``status`` or a connection error."""
    if attempt >= policy.max_attempts:
        return Decision(Action.GIVE_UP)
    if connection_error:
        return Decision(Action.RETRY, backoff(attempt, policy, rand))
    if status is None:
        return Decision(Action.GIVE_UP)
    if status == 429:
        seconds = parse_retry_after(retry_after)
        if seconds is None:
            return Decision(Action.RETRY, backoff(attempt, policy, rand))
        return Decision(Action.RETRY, min(seconds, policy.max_retry_after))
    if status >= 500 and status != 501:
        return Decision(Action.RETRY, backoff(attempt, policy, rand))
    if status == 409 and is_update:
        return Decision(Action.REREAD, 0.0)
    return Decision(Action.GIVE_UP)
