"""Slow and failed traces are kept up to TRACES_TAIL_PER_SECOND per topology: in an outage the first
ones are traced, the rest counted by their request records only."""

from __future__ import annotations

import asyncio
import os

from gateway.outcome import Outcome
from gateway.routes import RouteEntry
from traces import gatewayspans
from traces.sampling import TailBudget


def test_a_burst_of_the_rate_is_kept_then_the_rate_per_second() -> None:
    budget = TailBudget(10)
    assert sum(budget.take(100.0) for _ in range(50)) == 10  # a burst: as many as a second's worth
    assert sum(budget.take(100.5) for _ in range(50)) == 5  # half a second later: half as many
    assert sum(budget.take(102.5 + i / 100) for i in range(100)) == 10 + 9  # full again, then the rate


def test_no_limit_at_zero() -> None:
    budget = TailBudget(0)
    assert all(budget.take(1.0) for _ in range(1000))


def _entry(topology_id: int) -> RouteEntry:
    return RouteEntry(
        topology_id=topology_id, topology_name=f"t{topology_id}", model="m", names=("m",), endpoint="",
        fallback=None, timeout=5.0, breaker_failures=5, breaker_open_seconds=15.0,
    )  # fmt: skip


def test_an_outage_keeps_the_topologys_first_failed_traces_and_each_topology_its_own(settings) -> None:
    settings.TRACES_TAIL_PER_SECOND = 10
    settings.TRACES_HEAD_SAMPLE_RATE = 0.0

    def failed(topology_id: int) -> Outcome:
        outcome = Outcome(model="m", entry=_entry(topology_id))
        outcome.trace_id, outcome.status = os.urandom(16).hex(), 503
        return outcome

    async def notes() -> tuple[list[str], list[str], int]:
        first = [gatewayspans.note(failed(9001), endpoint="chat", latency_ms=5) for _ in range(100)]
        other = [gatewayspans.note(failed(9002), endpoint="chat", latency_ms=5) for _ in range(3)]
        loop_id = id(asyncio.get_running_loop())
        kept = len(gatewayspans._buffers.pop(loop_id, []))
        dropped = len(gatewayspans._dropped.pop(loop_id, []))
        gatewayspans._marking.pop(loop_id, None)
        for task in (gatewayspans._tasks.pop(loop_id, None), gatewayspans._markers.pop(loop_id, None)):
            if task is not None:
                task.cancel()
        assert (kept, dropped) == (13, 90)
        return first, other, kept

    first, other, _ = asyncio.run(notes())
    assert first.count("failed") == 10 and first.count("") == 90
    assert other == ["failed"] * 3
