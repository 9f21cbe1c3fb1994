"""A bulkhead per cluster: at most ``GATEWAY_CLUSTER_MAX_WAITING`` requests of this process wait for
the first byte of one serving endpoint at once (per process, as the circuit breaker).

A cluster that stops answering would otherwise hold every request sent to it for the whole first-byte
timeout: at 100 req/s and the default 60 s, 6,000 requests, their sockets, connections of the pooled
client (512, shared by every topology and the fallbacks) and the memory each holds. With the bulkhead
a request that finds its cluster full is turned away at once: to the fallback, or the documented 503
when there is none. It never tried the cluster, so it is neither a failure for the breaker nor its
half-open trial. A request waits from the moment it is sent until its first byte is in (a whole
answer: until all of it is in), or it failed. Topologies served by one endpoint share its bulkhead.
The fallback has none: it is the last resort, and a busy but healthy one must not turn requests away.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings

logger = logging.getLogger(__name__)
SETTING = "GATEWAY_CLUSTER_MAX_WAITING"
LOG_SECONDS = 10.0


@dataclass
class Bulkhead:
    endpoint: str
    limit: int  # 0: no cap
    waiting: int = 0
    turned_away: int = 0  # since the last warning
    warned_at: float = -LOG_SECONDS

    def enter(self) -> bool:
        """One more request may wait on the endpoint (True: it waits now, and must ``leave``)."""
        if not self.limit or self.waiting < self.limit:
            self.waiting += 1
            return True
        self.turned_away += 1
        now = time.monotonic()
        if now - self.warned_at >= LOG_SECONDS:  # a warning at most every LOG_SECONDS while it is full
            logger.warning(
                "gateway cluster endpoint %s is full: %d requests wait for its first byte (%s); "
                "%d turned away since the last warning",
                self.endpoint,
                self.waiting,
                SETTING,
                self.turned_away,
            )
            self.warned_at, self.turned_away = now, 0
        return False

    def leave(self) -> None:
        self.waiting -= 1

    def refusal(self) -> str:
        """Why a request was turned away, naming the cap."""
        return (
            f"already has {self.waiting} requests waiting for its first byte "
            f"(the gateway's cap per cluster, {SETTING}={self.limit})"
        )


_bulkheads: dict[str, Bulkhead] = {}


def bulkhead_for(endpoint: str) -> Bulkhead:
    """The bulkhead of a serving endpoint (its root URL) in this process."""
    found = _bulkheads.get(endpoint)
    if found is None:
        found = _bulkheads[endpoint] = Bulkhead(endpoint, settings.GATEWAY_CLUSTER_MAX_WAITING)
    else:
        found.limit = settings.GATEWAY_CLUSTER_MAX_WAITING
    return found
