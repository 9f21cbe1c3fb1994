"""Redis-held telemetry: the latest snapshot per topology, the collector's state, a collection lock."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import redis
from django.core.cache import cache

from telemetry.assemble import CollectorState, empty_state
from telemetry.probe import ProbeResult
from telemetry.snapshot import TopologySnapshot

logger = logging.getLogger(__name__)
SNAPSHOT_TTL = 24 * 3600
STATE_TTL = 3600


def _snapshot_key(topology_id: int) -> str:
    return f"telemetry:snapshot:{topology_id}"


def _state_key(topology_id: int) -> str:
    return f"telemetry:state:{topology_id}"


def _probes_key(topology_id: int) -> str:
    return f"telemetry:probes:{topology_id}"


def _lock_key(topology_id: int) -> str:
    return f"telemetry:lock:{topology_id}"


def get_snapshot(topology_id: int) -> TopologySnapshot | None:
    """The latest snapshot, or None when there is none or Redis does not answer (readers fall back to the
    copy in the database: pages stay up through a Redis outage, with figures as old as that copy)."""
    try:
        return cast("TopologySnapshot | None", cache.get(_snapshot_key(topology_id)))
    except redis.RedisError as error:
        logger.warning("telemetry snapshot %s read from the database: Redis: %s", topology_id, error)
        return None


def get_snapshots(topology_ids: list[int]) -> dict[int, TopologySnapshot]:
    try:
        found = cache.get_many([_snapshot_key(i) for i in topology_ids])
    except redis.RedisError as error:
        logger.warning("telemetry snapshots read from the database: Redis: %s", error)
        return {}
    return {i: found[_snapshot_key(i)] for i in topology_ids if _snapshot_key(i) in found}


def set_snapshot(snapshot: TopologySnapshot) -> None:
    cache.set(_snapshot_key(snapshot["topology_id"]), snapshot, SNAPSHOT_TTL)


def forget(topology_id: int) -> None:
    cache.delete_many([_snapshot_key(topology_id), _state_key(topology_id), _probes_key(topology_id)])


def get_state(topology_id: int) -> CollectorState:
    state = cache.get(_state_key(topology_id))
    return cast("CollectorState", state) if state else empty_state()


def set_state(topology_id: int, state: CollectorState) -> None:
    cache.set(_state_key(topology_id), state, STATE_TTL)


def put_probe_results(topology_id: int, results: list[ProbeResult]) -> None:
    """Keep the latest probe of each pair for the next collection, whichever process runs it (a
    probe ends after the collection that started it). Best effort: a result lost to a race or a Redis
    outage is replaced by the next interval's probe."""
    if not results:
        return
    try:
        kept = cache.get(_probes_key(topology_id)) or {}
        kept.update({f"{r['prefill']}>{r['decode']}": r for r in results})
        cache.set(_probes_key(topology_id), kept, STATE_TTL)
    except redis.RedisError as error:
        logger.warning("probe results of topology %s not kept: Redis: %s", topology_id, error)


def probe_results(topology_id: int) -> list[ProbeResult]:
    """The latest probe of each pair that finished, oldest first."""
    kept = cache.get(_probes_key(topology_id)) or {}
    return sorted(kept.values(), key=lambda r: r["ts"])


def _epoch_key(topology_id: int) -> str:
    return f"telemetry:series-epoch:{topology_id}"


def series_epoch(topology_id: int) -> int:
    """Changes whenever retention removed series of the topology (remembered series ids are stale)."""
    return int(cache.get(_epoch_key(topology_id), 0))


def bump_series_epoch(topology_id: int) -> None:
    if not cache.add(_epoch_key(topology_id), 1, None):
        cache.incr(_epoch_key(topology_id))


@contextmanager
def collection_lock(topology_id: int, seconds: float) -> Iterator[bool]:
    """Yield True when this caller holds the topology's collection lock (False: another run is on)."""
    token = uuid.uuid4().hex
    held = bool(cache.add(_lock_key(topology_id), token, max(1, int(seconds + 0.999))))
    try:
        yield held
    finally:
        if held and cache.get(_lock_key(topology_id)) == token:
            cache.delete(_lock_key(topology_id))
