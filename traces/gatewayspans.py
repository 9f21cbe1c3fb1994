"""The gateway's side of tracing: at the end of each request, keep its trace or not (traces.sampling).

Kept requests are buffered in process and written every FLUSH_SECONDS in one transaction off the
request path (after the gateway's recorder has written their records, so the link is found), with the
spans the receiver parked for them while their request ran. A trace kept for being slow or failed is
marked in Redis at once, so later spans are stored on arrival; the traces not kept are told to the
receiver in the same batches, so their spans are dropped on arrival (a head-kept trace needs neither:
the receiver knows it from its id).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from asgiref.sync import sync_to_async
from django.conf import settings

from traces import sampling
from traces.services import GatewayTrace

logger = logging.getLogger(__name__)
FLUSH_SECONDS = 2.0
MAX_BUFFER = 10_000
MAX_DROPPED = 200_000
_buffers: dict[int, list[GatewayTrace]] = {}
_dropped: dict[int, list[str]] = {}  # traces not kept, told to the receiver in batches
_tasks: dict[int, asyncio.Task[None]] = {}
_marking: dict[int, list[str]] = {}  # kept traces (slow or failed) not yet marked in Redis, per loop
_markers: dict[int, asyncio.Task[None]] = {}
_tail_budgets: dict[int, sampling.TailBudget] = {}  # per topology, this process's kept slow/failed


def note(outcome: Any, *, endpoint: str, latency_ms: float) -> str:
    """Decide on a finished gateway request's trace; returns why it is kept ("" when it is not)."""
    entry = outcome.entry
    if not outcome.trace_id or entry is None or outcome.probe:
        return ""
    kept, why = sampling.decide(
        trace_id=outcome.trace_id,
        status=outcome.status,
        backend=outcome.backend,
        latency_ms=latency_ms,
        ttft_ms=outcome.ttft_ms,
        completion_tokens=outcome.completion_tokens,
        slo_ttft_ms=entry.slo_ttft_ms,
        slo_tbt_ms=entry.slo_tbt_ms,
        head_rate=settings.TRACES_HEAD_SAMPLE_RATE,
    )
    loop = asyncio.get_running_loop()
    if kept in ("failed", "slow") and not _tail_budget(entry.topology_id).take(time.monotonic()):
        kept, why = "", ""  # over the topology's TRACES_TAIL_PER_SECOND: the record still counts it
    if not kept:
        _dropped.setdefault(id(loop), []).append(outcome.trace_id)
        _ensure(loop)
        return ""
    end = datetime.now(UTC)
    record = GatewayTrace(
        trace_id=outcome.trace_id,
        span_id=outcome.span_id,
        parent_span_id=outcome.parent_span_id,
        kept=kept,
        reason=why,
        start=end - timedelta(milliseconds=latency_ms),
        end=end,
        topology_id=entry.topology_id,
        topology_name=entry.topology_name,
        model=outcome.model,
        endpoint=endpoint,
        backend=outcome.backend,
        status=outcome.status,
        error_code=outcome.error_code,
        stream=outcome.stream,
        latency_ms=latency_ms,
        ttft_ms=outcome.ttft_ms,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        cached_tokens=outcome.cached_tokens,
    )
    buffer = _buffers.setdefault(id(loop), [])
    if len(buffer) < MAX_BUFFER:
        buffer.append(record)
    _ensure(loop)
    if kept != "head":
        _mark_soon(loop, outcome.trace_id)
    return kept


def _tail_budget(topology_id: int) -> sampling.TailBudget:
    budget = _tail_budgets.get(topology_id)
    if budget is None or budget.per_second != settings.TRACES_TAIL_PER_SECOND:
        budget = _tail_budgets[topology_id] = sampling.TailBudget(settings.TRACES_TAIL_PER_SECOND)
    return budget


def _ensure(loop: asyncio.AbstractEventLoop) -> None:
    task = _tasks.get(id(loop))
    if task is None or task.done():
        _tasks[id(loop)] = loop.create_task(_run(id(loop)))


def _mark_soon(loop: asyncio.AbstractEventLoop, trace_id: str) -> None:
    _marking.setdefault(id(loop), []).append(trace_id)
    task = _markers.get(id(loop))
    if task is None or task.done():
        _markers[id(loop)] = loop.create_task(_mark_pending(id(loop)))


async def _mark_pending(loop_id: int) -> None:
    """Mark kept traces in Redis as they come, all those kept meanwhile in one round trip: one job in a
    worker thread at a time, however many requests are kept at once. (A job per trace made a failover,
    which keeps every request, start threads up to the executor's limit, each with its own
    connections and malloc arena, kept for the process's life.)"""
    while _marking.get(loop_id):
        batch, _marking[loop_id] = _marking[loop_id], []
        await sync_to_async(_mark, thread_sensitive=False)(batch)


def _mark(trace_ids: list[str]) -> None:
    from keys import limits
    from traces.services import kept_key

    try:
        with limits.client().pipeline(transaction=False) as pipe:
            for trace_id in trace_ids:
                pipe.set(kept_key(trace_id), b"1", ex=settings.TRACES_KEEP_WINDOW_SECONDS)
            pipe.execute()
    except Exception:
        logger.warning("could not mark %d traces kept: their engines' spans may be dropped", len(trace_ids))


async def _run(loop_id: int) -> None:
    while _buffers.get(loop_id) or _dropped.get(loop_id):
        await asyncio.sleep(FLUSH_SECONDS)
        await flush(loop_id)


async def flush(loop_id: int | None = None) -> None:
    """Write this loop's kept requests (the gateway's lifespan and tests call it to write them now)."""
    loop_id = id(asyncio.get_running_loop()) if loop_id is None else loop_id
    records, _buffers[loop_id] = _buffers.get(loop_id, []), []
    dropped, _dropped[loop_id] = _dropped.get(loop_id, [])[:MAX_DROPPED], []
    if not records and not dropped:
        return
    from traces.services import decisions_record, gateway_traces_store

    def write() -> None:
        from django.db import close_old_connections

        close_old_connections()
        if records:
            gateway_traces_store(records=records)
        decisions_record(kept=[r.trace_id for r in records], dropped=dropped)

    try:
        await sync_to_async(write, thread_sensitive=False)()
    except redis.RedisError as error:  # an outage the gateway serves through: no traceback every flush
        logger.warning(
            "could not record %d trace decisions: Redis is not answering (%s); the engines' spans of these "
            "traces may be dropped",
            len(records) + len(dropped),
            type(error).__name__,
        )
    except Exception:
        logger.exception("could not write %d kept traces", len(records))
