"""The performance model: a continuous-batching scheduler like vLLM V1's, in simulated time.

Each step runs the decode batch (one token per running sequence) plus prefill chunks within a
token budget (`max_num_batched_tokens`), and takes
    overhead + (decode_step + per_seq × batch if any sequence decodes) + prefill_per_token × prefill tokens
(× the time scale). At most `max_num_seqs` sequences run; the rest wait in FCFS order, and a
sequence is admitted only when the step has token budget left and its KV blocks fit. Blocks are
allocated as tokens are generated; when none is free, the most recently admitted sequence is
preempted (its KV freed, recomputed later), as vLLM V1 does. Prompt blocks found in the prefix cache are not
computed; a decode-role sequence pulls its prompt's KV from the prefill instance instead (the
engine supplies the pull) and starts decoding once it arrives. So a prompt-heavy load queues
behind prefill and TTFT rises; a generation-heavy load fills the batch and ITL rises.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from perfmodel.model import clock
from perfmodel.model.config import PerfConfig
from perfmodel.model.prefix_cache import PrefixCache
from perfmodel.model.stats import EngineStats


@dataclass(eq=False)
class Sequence:
    request_id: str
    prompt_len: int
    hashes: list[int]
    output_len: int
    finish_on_length: bool = True
    remote: dict[str, Any] | None = None  # decode side: kv_transfer_params naming the prefill instance
    prefill_only: bool = False  # prefill side: stop after the first token and hold the KV
    arrival: float = field(default_factory=clock.now)
    state: str = "waiting"  # waiting | pulling | prefill | decode | done
    computed: int = 0
    cached_tokens: int = 0
    generated: int = 0
    blocks: int = 0
    scheduled_at: float = 0.0
    first_token_at: float | None = None
    last_token_at: float = 0.0
    finished_at: float = 0.0
    finish_reason: str | None = None
    error: str | None = None
    store_hits: int = 0  # prompt tokens loaded from the Mooncake Store (external, not this engine's cache)
    extra_seconds: float = 0.0  # one-off time added to the next step (loading KV from a store)
    recompute: int = 0  # generated tokens to prefill again after a preemption
    event: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def target(self) -> int:
        """Tokens whose KV must exist before the next token: the prompt (+ output, after a preemption)."""
        return self.prompt_len + self.recompute


@dataclass
class HeldKV:
    blocks: int
    prompt_len: int
    expires: float


PullFn = Callable[[Sequence], Awaitable[bool]]
_COMPUTING = ("decode", "prefill")
HookFn = Callable[[Sequence], None]


class Scheduler:
    def __init__(
        self,
        cfg: PerfConfig,
        stats: EngineStats,
        cache: PrefixCache,
        pull: PullFn,
        after_lookup: HookFn,
        after_prefill: HookFn,
    ) -> None:
        self.cfg = cfg
        self.stats = stats
        self.cache = cache
        self._pull = pull
        self._after_lookup = after_lookup
        self._after_prefill = after_prefill
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.used_blocks = 0
        self.held: OrderedDict[str, HeldKV] = OrderedDict()
        self.held_blocks = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._pulls: set[asyncio.Task[None]] = set()

    # --- gauges -------------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return sum(1 for s in self.running if s.state in ("prefill", "decode"))

    @property
    def num_pulling(self) -> int:
        return sum(1 for s in self.running if s.state == "pulling")

    @property
    def num_waiting(self) -> int:
        return len(self.waiting) + self.num_pulling

    @property
    def kv_usage(self) -> float:
        return min(1.0, (self.used_blocks + self.held_blocks) / self.cfg.num_gpu_blocks)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.cfg.block_size)

    # --- requests -----------------------------------------------------------------------------
    def submit(self, seq: Sequence) -> None:
        self.waiting.append(seq)
        self._kick()

    def abort(self, seq: Sequence, error: str | None = None) -> None:
        if seq.state == "done":
            return
        if seq in self.waiting:
            self.waiting.remove(seq)
        seq.error = error
        self._finish(seq, "abort", clock.now())
        self._kick()

    def release_held(self, request_id: str) -> HeldKV | None:
        self.expire_held()
        held = self.held.pop(request_id, None)
        if held is not None:
            self.held_blocks -= held.blocks
            self._kick()
        return held

    def expire_held(self) -> None:
        now = clock.now()
        while self.held:
            held = next(iter(self.held.values()))
            if held.expires > now:
                break
            self.held.popitem(last=False)
            self.held_blocks -= held.blocks
            self.stats.kv_expired += 1

    def expire_now(self, request_id: str) -> None:
        """The KV held for ``request_id`` expires at once (an injected fault): counted as expired."""
        held = self.held.get(request_id)
        if held is not None:
            held.expires = clock.now()
            self.held.move_to_end(request_id, last=False)
            self.expire_held()

    def drop_all_held(self) -> None:
        self.held.clear()
        self.held_blocks = 0

    def idle(self) -> bool:
        return not self.running and not self.waiting

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())
        else:
            self._wake.set()

    async def close(self) -> None:
        for seq in list(self.running) + list(self.waiting):
            self.abort(seq, "engine shutting down")
        for task in (self._task, *self._pulls):
            if task is not None and not task.done():
                task.cancel()

    # --- the step loop ------------------------------------------------------------------------
    async def _loop(self) -> None:
        cfg = self.cfg
        while True:
            decoding = self._grow([s for s in self.running if s.state == "decode"])
            budget = cfg.max_num_batched_tokens - len(decoding)
            work: list[tuple[Sequence, int]] = []
            for seq in self.running:
                if seq.state == "prefill" and budget > 0:
                    chunk = min(seq.target - seq.computed, budget)
                    work.append((seq, chunk))
                    budget -= chunk
            # Like vLLM V1: waiting requests are scheduled only while this step has token budget left.
            while budget > 0:
                admitted = self._admit_one()
                if admitted is None:
                    break
                if admitted.state == "prefill":
                    chunk = min(admitted.target - admitted.computed, budget)
                    work.append((admitted, chunk))
                    budget -= chunk
            if not decoding and not work:
                if not self.running and not self.waiting:
                    return
                self._wake.clear()
                # Woken by a submit or a finished pull; the timeout retries admission when held KV expires.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=0.25)
                continue
            extra = 0.0
            for seq, _ in work:
                extra += seq.extra_seconds
                seq.extra_seconds = 0.0
            ms = cfg.step_overhead_ms + cfg.prefill_ms_per_token * sum(n for _, n in work)
            if decoding:
                ms += cfg.decode_step_ms + cfg.decode_ms_per_seq * len(decoding)
            if cfg.jitter:
                ms *= 1 + cfg.jitter * (2 * random.random() - 1)
            await asyncio.sleep((ms / 1000 + extra) * cfg.time_scale)
            now = clock.now()
            for seq, chunk in work:
                if seq.state != "prefill":
                    continue
                seq.computed += chunk
                if seq.computed >= seq.target:
                    self._prefill_done(seq, now)
            for seq in decoding:
                if seq.state == "decode":
                    self._emit(seq, now)

    def _admit_one(self) -> Sequence | None:
        """Move the head of the queue into the running batch if a slot and its KV blocks are free."""
        cfg = self.cfg
        while self.waiting and len(self.running) < cfg.max_num_seqs:
            seq = self.waiting[0]
            need = self.blocks_for(seq.target + 1)
            if self.used_blocks + self.held_blocks + need > cfg.num_gpu_blocks:
                self.expire_held()
                if self.used_blocks + self.held_blocks + need > cfg.num_gpu_blocks:
                    if not self.running and self.held_blocks == 0:
                        self.waiting.popleft()
                        seq.error = "the request needs more KV blocks than the engine has"
                        self._finish(seq, "abort", clock.now())
                        continue
                    return None
            self.waiting.popleft()
            now = clock.now()
            seq.blocks = need
            self.used_blocks += need
            if not seq.scheduled_at:  # a preempted sequence coming back is not a new request
                seq.scheduled_at = now
                self.stats.queue.observe(now - seq.arrival)
                self.stats.prompt_tokens += seq.prompt_len
            self.running.append(seq)
            if seq.remote is not None:
                seq.state = "pulling"
                task = asyncio.get_running_loop().create_task(self._run_pull(seq))
                self._pulls.add(task)
                task.add_done_callback(self._pulls.discard)
            else:
                self._lookup(seq)
                seq.state = "prefill"
            return seq
        return None

    @property
    def free_blocks(self) -> int:
        return self.cfg.num_gpu_blocks - self.used_blocks - self.held_blocks

    def _grow(self, decoding: list[Sequence]) -> list[Sequence]:
        """Give each decoding sequence the block its next token needs, preempting from the back if full."""
        for seq in decoding:
            if seq.state != "decode":
                continue
            need = self.blocks_for(seq.prompt_len + seq.generated + 1) - seq.blocks
            while need > 0 and self.free_blocks < need:
                victim = next(
                    (v for v in reversed(self.running) if v is not seq and v.state in _COMPUTING), None
                )
                if victim is None:
                    break
                self._preempt(victim)
            if need > 0 and self.free_blocks < need:
                self._preempt(seq)
                continue
            if need > 0:
                seq.blocks += need
                self.used_blocks += need
        return [s for s in decoding if s.state == "decode"]

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.used_blocks -= seq.blocks
        seq.blocks = 0
        seq.state = "waiting"
        seq.remote = None  # its pulled KV is gone: recompute locally
        seq.recompute = seq.generated
        seq.computed = seq.cached_tokens = seq.store_hits = 0
        self.waiting.appendleft(seq)
        self.stats.preemptions += 1

    def _lookup(self, seq: Sequence) -> None:
        """Local prefix-cache hits (then the connector's external store, via the hook)."""
        if self.cfg.prefix_caching:
            hit_blocks = self.cache.match(seq.hashes)
            hits = min(hit_blocks * self.cfg.block_size, max(0, seq.prompt_len - 1))
            self.stats.prefix_queries += seq.prompt_len
            self.stats.prefix_hits += hits
            seq.computed = seq.cached_tokens = hits
        self._after_lookup(seq)

    async def _run_pull(self, seq: Sequence) -> None:
        ok = await self._pull(seq)
        if seq.state != "pulling":
            return
        now = clock.now()
        if ok:
            seq.computed = seq.target
            seq.state = "decode"
            self.stats.prefill.observe(now - seq.scheduled_at)
        elif self.cfg.kv_failure_policy == "recompute" or seq.error is None:
            # a failed pull (or, without an error, a connector that silently delivered nothing): prefill here
            self._lookup(seq)
            seq.state = "prefill"
        else:
            seq.error = seq.error or "KV transfer from the prefill instance failed"
            self._finish(seq, "abort", now)
        self._kick()

    def _prefill_done(self, seq: Sequence, now: float) -> None:
        if self.cfg.prefix_caching:
            self.cache.insert(seq.hashes)
        self._after_prefill(seq)
        if seq.first_token_at is None:
            self.stats.prefill.observe(now - seq.scheduled_at)
            self.stats.count_prompt_sources(
                computed=seq.prompt_len - seq.cached_tokens,
                cache_hit=seq.cached_tokens - seq.store_hits,
                external=seq.store_hits,
            )
        self._emit(seq, now)
        if seq.state != "done":
            seq.state = "decode"

    def _emit(self, seq: Sequence, now: float) -> None:
        seq.generated += 1
        self.stats.generation_tokens += 1
        if seq.first_token_at is None:
            seq.first_token_at = now
            self.stats.ttft.observe(now - seq.arrival)
        else:
            self.stats.itl.observe(now - seq.last_token_at)
        seq.last_token_at = now
        if seq.generated >= seq.output_len:
            self._finish(seq, "length" if seq.finish_on_length else "stop", now, hold=seq.prefill_only)
        seq.event.set()

    def _finish(self, seq: Sequence, reason: str, now: float, hold: bool = False) -> None:
        if seq in self.running:
            self.running.remove(seq)
        if seq.blocks:
            self.used_blocks -= seq.blocks
            if hold:
                self.held[seq.request_id] = HeldKV(seq.blocks, seq.prompt_len, now + self.cfg.kv_hold_seconds)
                self.held_blocks += seq.blocks
            seq.blocks = 0
        seq.state = "done"
        seq.finish_reason = reason
        seq.finished_at = now
        self.stats.finished[reason] += 1
        if reason == "abort":
            self.stats.failed_requests += 1
        self.stats.e2e.observe(now - seq.arrival)
        if seq.first_token_at is not None:
            self.stats.decode.observe(now - seq.first_token_at)
            if seq.generated > 1:
                self.stats.tpot.observe((now - seq.first_token_at) / (seq.generated - 1))
        seq.event.set()
