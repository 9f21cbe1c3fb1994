"""One instance of the performance model: its continuous-batching scheduler, prefix cache and statistics,
and the decode side's KV pull from a prefill instance over a link that moves one KV cache at a time.

The simulator (``perfmodel.sim``) runs this model bare on a virtual clock; the sandbox's engines
(``sandbox/engine/engine.py``) are the same model with an HTTP face, fault injection, connector logs and
link tables, so what the what-if predicts and what the sandbox serves come from one model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from perfmodel.model import clock
from perfmodel.model.config import PerfConfig
from perfmodel.model.prefix_cache import PrefixCache
from perfmodel.model.scheduler import Scheduler, Sequence
from perfmodel.model.stats import EngineStats


class Lane(Protocol):
    """A link's transfer queue: the time its queued transfers finish."""

    busy_until: float


@dataclass
class _Lane:
    busy_until: float = 0.0


class ModelEngine:
    def __init__(
        self,
        name: str,
        ip: str,
        port: int,
        cfg: PerfConfig,
        lookup: Callable[[str], ModelEngine | None],
    ) -> None:
        self.name = name
        self.ip = ip
        self.port = port
        self.cfg = cfg
        self._lookup = lookup
        self.stats = EngineStats()
        self.cache = PrefixCache(cfg.num_gpu_blocks if cfg.prefix_caching else 0)
        self.inflight = 0
        self._next_id = 0
        self._lanes: dict[str, _Lane] = {}
        self.scheduler = Scheduler(
            cfg, self.stats, self.cache, self._pull, self._after_lookup, self._after_prefill
        )

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    def new_request_id(self, prefix: str) -> str:
        self._next_id += 1
        return f"{prefix}-{self.name}-{self._next_id}"

    def _after_lookup(self, seq: Sequence) -> None:
        """After the prefix-cache lookup of ``seq`` (the sandbox's engines consult an external KV store)."""

    def _after_prefill(self, seq: Sequence) -> None:
        """After ``seq``'s prompt was computed (the sandbox's engines write it to an external KV store)."""

    async def _pull(self, seq: Sequence) -> bool:
        """Pull ``seq``'s prompt KV from the prefill instance its ``remote`` parameters name."""
        params = seq.remote or {}
        peer = self._lookup(f"{params.get('remote_host')}:{params.get('remote_port')}")
        self.stats.external_queries += seq.prompt_len
        if peer is None:
            self.stats.failed_transfers += 1
            seq.error = f"no prefill instance at {params.get('remote_host')}:{params.get('remote_port')}"
            return False
        held = peer.scheduler.release_held(str(params.get("request_id") or ""))
        if held is None:
            self.stats.failed_recvs += 1
            seq.error = f"{peer.name} holds no KV for request {params.get('request_id')}"
            return False
        lane = self._lanes.setdefault(peer.name, _Lane())
        await self.receive(seq, lane, held.prompt_len * self.cfg.kv_bytes_per_token)
        return True

    async def receive(
        self, seq: Sequence, lane: Lane, num_bytes: int, factor: float = 1.0, delay_ms: float = 0.0
    ) -> float:
        """Move ``seq``'s prompt KV (``num_bytes``) over ``lane`` behind the transfers queued on it
        (latency + bytes / bandwidth, × ``factor`` on a slow link), count it and cache its blocks; returns
        the seconds it took."""
        started = clock.now()
        seconds = self.cfg.transfer_seconds(num_bytes, factor, delay_ms)
        lane.busy_until = max(started, lane.busy_until) + seconds * self.cfg.time_scale
        await asyncio.sleep(lane.busy_until - started)
        elapsed = clock.now() - started
        self.stats.observe_transfer(elapsed, num_bytes)
        self.stats.external_hits += seq.prompt_len
        self.stats.count_prompt_sources(computed=0, cache_hit=0, external=seq.prompt_len)
        if self.cfg.prefix_caching:
            self.cache.insert(seq.hashes)
        return elapsed
