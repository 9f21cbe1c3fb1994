"""A simulated P/D cluster on the virtual clock: the sandbox's engines, its router's pod choice, and
restart-based role changes that cost a model load.

Each request goes the way the sandbox's router sends it: a prefill instance (prefix affinity, else
least loaded; ``sandbox.router.policy.choose``) computes the prompt and holds its KV, then a decode
instance pulls the KV over its link (``SimEngine._pull``: bytes / bandwidth + latency, one transfer
per link at a time) and generates. Only the HTTP hop is left out. A controller called every ``tick``
seconds may ask for another split; the cluster reaches it one instance at a time, like Tandem does:
while the budget has room the growing role gains an instance first (Ready after
``model_load_seconds``), otherwise the shrinking role gives one up first; an instance being removed
takes no new requests and finishes its in-flight ones (bounded by ``drain_timeout``) before it goes.

With ``in_place`` (engines that switch a running instance's role: MindIE, SGLang with Mooncake), an
opposing move takes an instance of the shrinking role out of routing, drains it the same way, then
switches it: its links torn down and set up again with the other role's instances and the switch
itself (the sandbox's ``link_teardown_ms``, ``link_setup_ms`` and ``role_switch_ms``), after which it
serves the other role with an empty prefix cache. No model load; a drain that times out cancels the
switch and the instance serves its old role again, as Tandem's executor does.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.engine import clock
from sandbox.engine.config import PerfConfig
from sandbox.engine.engine import SimEngine
from sandbox.engine.scheduler import Sequence
from sandbox.engine.testing import engine_spec
from sandbox.load.report import quantile
from sandbox.router.policy import AFFINITY_BLOCKS, AffinityTable, choose

GROUP = "g0"


@dataclass(frozen=True)
class SimRequest:
    at: float  # seconds after the start
    prompt_len: int
    output_len: int
    prefix: int = -1  # shared-prefix id (-1: none)
    prefix_len: int = 0  # tokens of the shared prefix (part of prompt_len)
    kind: str = "normal"


@dataclass
class Outcome:
    at: float
    kind: str
    ok: bool
    error: str | None = None
    ttft: float | None = None  # seconds from the request's arrival
    prefill_ttft: float | None = None  # seconds from arrival to the prefill instance's first token
    tbt: float | None = None  # mean time between tokens
    gaps: list[float] = field(default_factory=list)  # each token gap as a streaming client sees it
    finished: float = 0.0


@dataclass(frozen=True)
class ClusterView:
    """What a controller sees at a tick (latencies in ms over the last interval; None = no data)."""

    ts: float
    prefill: int  # instances per role, loading ones included, draining ones not
    decode: int
    ready_prefill: int
    ready_decode: int
    busy: bool
    ttft_p95_ms: float | None
    tbt_p95_ms: float | None
    prefill_ttft_p95_ms: float | None
    prefill_waiting: float
    decode_waiting: float
    decode_kv_usage: float | None
    prompt_tps: float
    gen_tps: float
    finished: int
    # Like the per-role telemetry Tandem collects: prefix-cache hit rate of the prefill role's prompt
    # tokens, requests each role finished per second, sequences in decode's running batch.
    prefill_hit_rate: float | None = None
    prefill_requests_ps: float | None = None
    decode_requests_ps: float | None = None
    decode_running: float | None = None


@dataclass(frozen=True)
class Stage:
    """A controller's request to take a move's donors out of routing ahead of the move (they drain while
    it is confirmed); ``unstage`` routes them again."""

    prefill: int  # the staged move's target split
    decode: int
    unstage: bool = False


Controller = Callable[[ClusterView], "tuple[int, int] | Stage | None"]


@dataclass
class Instance:
    engine: SimEngine
    role: str
    state: str  # loading | ready | staged (out of routing ahead of a move) | draining
    ready_at: float


def _load(engine: SimEngine) -> int:
    """Requests on an engine: in flight, queued, and (a prefill) KV held until a decode pulls it."""
    scheduler = engine.scheduler
    return engine.inflight + scheduler.num_waiting + scheduler.num_running + len(scheduler.held)


def _drains_soonest(instance: Instance) -> tuple[int, int]:
    """Sort key of the instance a switch takes first: the fewest requests on it, then the newest."""
    return _load(instance.engine), -int(instance.engine.name.rsplit("-", 1)[1])


class SimCluster:
    def __init__(
        self,
        prefill: int,
        decode: int,
        cfg: PerfConfig | None = None,
        *,
        budget: int | None = None,
        model_load_seconds: float = 30.0,
        drain_timeout: float = 120.0,
        keep_gaps: bool = False,
        retry_attempts: int = 2,
        in_place: bool = False,
        fail_moves: bool = False,
    ) -> None:
        self.cfg = cfg or PerfConfig()
        self.in_place = in_place
        # Tandem's executor: a switch that fails (its drain timed out) fails the whole move; the instance
        # and those not yet switched serve their old role again, and the controller decides anew.
        self.fail_moves = fail_moves
        self.failed_moves = 0
        self.switches = 0  # in-place switches done
        self.switch_seconds: list[float] = []  # drain + switch, each
        self.retry_attempts = retry_attempts
        self.initial = (prefill, decode)
        self.budget = budget if budget is not None else prefill + decode
        self.model_load_seconds = model_load_seconds
        self.drain_timeout = drain_timeout
        self.keep_gaps = keep_gaps
        self.instances: dict[str, Instance] = {}
        self.by_address: dict[str, SimEngine] = {}
        self.affinity = AffinityTable()
        self.inflight: Counter[str] = Counter()
        self.turn = 0
        self.counter = itertools.count()
        self.hashes = itertools.count(1 << 40)
        self.outcomes: list[Outcome] = []
        self.role_changes = 0  # splits reached on a controller's request
        self.moves = 0  # instances added or removed
        self.failed_by_rebalancing = 0
        self.busy = False
        self.timeline: list[tuple[float, int, int, str]] = []  # (ts, prefill, decode, why)
        self._window: list[Outcome] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_tokens = (0, 0)
        self._last_prefix = (0, 0)
        self._prefilled = 0  # prefill-role requests finished in the current interval

    # --- instances ------------------------------------------------------------------------------
    def _lookup(self, address: str) -> SimEngine | None:
        return self.by_address.get(address)

    def _spawn(self, role: str, load_seconds: float) -> Instance:
        index = next(self.counter)
        name = f"{role}-{index}"
        spec = engine_spec(role)
        engine = SimEngine(f"sim/{name}", "10.0.0.1", 10000 + index, spec, {}, self.cfg, self._lookup, None)
        self.by_address[engine.address] = engine
        self.by_address[name] = engine
        instance = Instance(
            engine, role, "loading" if load_seconds > 0 else "ready", clock.now() + load_seconds
        )
        self.instances[name] = instance
        return instance

    def count(self, role: str) -> int:
        return sum(1 for i in self.instances.values() if i.role == role and i.state != "draining")

    def ready(self, role: str) -> list[Instance]:
        moment = clock.now()
        out = []
        for instance in self.instances.values():
            if instance.state == "loading" and moment >= instance.ready_at:
                instance.state = "ready"
            if instance.role == role and instance.state == "ready":
                out.append(instance)
        return out

    async def _add(self, role: str) -> None:
        instance = self._spawn(role, self.model_load_seconds)
        self.moves += 1
        await asyncio.sleep(max(0.0, instance.ready_at - clock.now()))
        instance.state = "ready"

    async def _drain(self, engine: SimEngine) -> bool:
        """Wait until ``engine`` holds no request (bounded by ``drain_timeout``); whether it emptied."""
        deadline = clock.now() + self.drain_timeout
        while clock.now() < deadline:
            engine.scheduler.expire_held()
            if engine.inflight == 0 and engine.scheduler.idle() and not engine.scheduler.held:
                return True
            await asyncio.sleep(0.1)
        return False

    async def _retire(self, engine: SimEngine) -> None:
        decoding = sum(1 for s in engine.scheduler.running if s.state == "decode" and not s.prefill_only)
        await engine.scheduler.close()  # queued prefills fail over to other pods; streamed answers are lost
        self.failed_by_rebalancing += decoding
        del self.instances[engine.name]
        self.by_address.pop(engine.address, None)
        self.by_address.pop(engine.name, None)

    def stage(self, request: Stage) -> None:
        """Take the donors of a move to ``request``'s split out of routing (the least busy first), or
        with ``unstage`` route every staged instance again."""
        if request.unstage:
            for instance in self.instances.values():
                if instance.state == "staged":
                    instance.state = "ready"
            return
        for role, target in (("prefill", request.prefill), ("decode", request.decode)):
            ready = [i for i in self.instances.values() if i.role == role and i.state == "ready"]
            staged = sum(1 for i in self.instances.values() if i.role == role and i.state == "staged")
            ready.sort(key=_drains_soonest)
            for instance in ready[: max(0, self.count(role) - staged - target)]:
                instance.state = "staged"

    def _donor(self, role: str, least_busy: bool = False) -> Instance | None:
        """The instance a scale-down removes (the newest), or for a switch the one that drains soonest:
        a staged one, else the fewest requests on it, then the newest."""
        staged = [i for i in self.instances.values() if i.role == role and i.state == "staged"]
        if staged and least_busy:
            return staged[0]
        candidates = [i for i in self.instances.values() if i.role == role and i.state == "ready"]
        if not candidates:
            return None
        if least_busy:
            return min(candidates, key=_drains_soonest)
        return max(candidates, key=lambda i: i.engine.name)

    async def _remove(self, role: str) -> None:
        instance = self._donor(role)
        if instance is None:
            return
        instance.state = "draining"
        self.moves += 1
        await self._drain(instance.engine)
        await self._retire(instance.engine)

    async def _switch(self, source: str, target: str, count: int) -> bool:
        """In-place switches of ``count`` ``source`` instances to ``target``, as Tandem runs them: all of
        them out of routing at once (their drains overlap), then one at a time, once drained, unlinked,
        switched and re-linked. A drain that does not finish returns that instance to ``source``; with
        ``fail_moves`` so do the ones not yet switched, and the move ends (False)."""
        donors = []
        for _ in range(count):
            instance = self._donor(source, least_busy=True)
            if instance is None:
                break
            instance.state = "draining"
            donors.append(instance)
        started = clock.now()
        for index, instance in enumerate(donors):
            if not await self._drain(instance.engine):
                instance.state = "ready"
                if self.fail_moves:
                    for other in donors[index + 1 :]:
                        other.state = "ready"
                    self.failed_moves += 1
                    return False
                continue
            # Its links were with the target role's instances; afterwards they are with the source role's.
            teardown = len(self.ready(target)) * self.cfg.link_teardown_ms
            setup = len(self.ready(source)) * self.cfg.link_setup_ms
            cost = (teardown + self.cfg.role_switch_ms + setup) / 1000
            await self._retire(instance.engine)
            switched = self._spawn(target, cost)
            self.switches += 1
            self.moves += 1
            await asyncio.sleep(max(0.0, switched.ready_at - clock.now()))
            switched.state = "ready"
            self.switch_seconds.append(clock.now() - started)
        if len(donors) < count or any(i.state == "ready" and i.role == source for i in donors):
            await asyncio.sleep(1.0)  # a switch was cancelled: look again before retrying
        return True

    async def apply(self, target: tuple[int, int], why: str = "") -> None:
        """Reach ``target`` one instance at a time (adding first while the budget allows)."""
        self.busy = True
        try:
            while (self.count("prefill"), self.count("decode")) != target:
                p, d = self.count("prefill"), self.count("decode")
                grow = [
                    r for r, cur, tgt in (("prefill", p, target[0]), ("decode", d, target[1])) if cur < tgt
                ]
                shrink = [
                    r for r, cur, tgt in (("prefill", p, target[0]), ("decode", d, target[1])) if cur > tgt
                ]
                if grow and shrink and self.in_place:
                    wanted = min(abs(p - target[0]), abs(d - target[1]))
                    if not await self._switch(shrink[0], grow[0], wanted):
                        self.timeline.append(
                            (clock.now(), self.count("prefill"), self.count("decode"), "failed")
                        )
                        return
                elif grow and len(self.instances) < self.budget:
                    await self._add(grow[0])
                elif shrink:
                    await self._remove(shrink[0])
                elif grow:  # budget taken by an instance still draining
                    await asyncio.sleep(0.5)
                else:
                    break
            self.role_changes += 1
            self.timeline.append((clock.now(), target[0], target[1], why))
        finally:
            self.stage(Stage(0, 0, unstage=True))  # staged instances the move did not take serve again
            self.busy = False

    # --- requests -------------------------------------------------------------------------------
    def _hashes(self, req: SimRequest) -> list[int]:
        block = self.cfg.block_size
        blocks = -(-req.prompt_len // block)
        shared = min(blocks, req.prefix_len // block) if req.prefix >= 0 else 0
        head = [hash(("prefix", req.prefix, i)) for i in range(shared)]
        return head + [next(self.hashes) for _ in range(blocks - shared)]

    async def _wait(self, seq: Sequence) -> None:
        while seq.state != "done":
            await seq.event.wait()
            seq.event.clear()

    async def serve(self, req: SimRequest, arrival: float) -> Outcome:
        outcome = Outcome(at=req.at, kind=req.kind, ok=False)
        hashes = self._hashes(req)
        exclude: set[str] = set()
        # Like the sandbox's router: a failed prefill (nothing streamed yet) is retried on other pods.
        for _attempt in range(1 + self.retry_attempts):
            prefills = [(i.engine.name, GROUP) for i in self.ready("prefill")]
            decodes = [(i.engine.name, GROUP) for i in self.ready("decode")]
            self.turn += 1
            choice = choose(
                prefills,
                decodes,
                [],
                hashes[:AFFINITY_BLOCKS],
                self.affinity,
                self.inflight,
                exclude,
                self.turn,
            )
            if choice is None or choice.prefill is None:
                outcome.error = "no_route"
                return outcome
            if not choice.affinity_hit:
                self.affinity.remember(hashes[:AFFINITY_BLOCKS], choice.prefill)
            prefill = self.instances[choice.prefill].engine
            decode = self.instances[choice.decode].engine
            first = Sequence(
                request_id=prefill.new_request_id("req"),
                prompt_len=req.prompt_len,
                hashes=hashes,
                output_len=1,
                prefill_only=True,
                arrival=arrival,
            )
            self.inflight[prefill.name] += 1
            prefill.inflight += 1
            try:
                prefill.scheduler.submit(first)
                await self._wait(first)
            finally:
                self.inflight[prefill.name] -= 1
                prefill.inflight -= 1
            if first.finish_reason != "abort":
                self._prefilled += 1
                break
            outcome.error = first.error or "prefill aborted"
            exclude.add(prefill.name)
        else:
            return outcome
        outcome.error = None
        if first.first_token_at is not None:
            outcome.prefill_ttft = first.first_token_at - arrival
        params = {
            "do_remote_prefill": True,
            "remote_engine_id": prefill.name,
            "remote_host": prefill.ip,
            "remote_port": prefill.port,
            "request_id": first.request_id,
        }
        second = Sequence(
            request_id=decode.new_request_id("req"),
            prompt_len=req.prompt_len,
            hashes=hashes,
            output_len=req.output_len,
            remote=params,
        )
        self.inflight[decode.name] += 1
        decode.inflight += 1
        sent = 0
        last: float | None = None
        gaps_sum, gaps_n = 0.0, 0
        try:
            decode.scheduler.submit(second)
            while True:
                await second.event.wait()
                second.event.clear()
                if second.finish_reason == "abort":
                    outcome.error = second.error or "decode aborted"
                    return outcome
                new = second.generated - sent
                if new > 0:
                    moment = clock.now()
                    if last is None:
                        outcome.ttft = moment - arrival
                        extra = new - 1
                    else:
                        gaps_sum += moment - last
                        gaps_n += 1
                        extra = new - 1
                        if self.keep_gaps:
                            outcome.gaps.append(moment - last)
                    gaps_n += extra
                    if self.keep_gaps:
                        outcome.gaps.extend([0.0] * extra)
                    last = moment
                    sent = second.generated
                if second.state == "done":
                    break
        finally:
            self.inflight[decode.name] -= 1
            decode.inflight -= 1
        outcome.ok = outcome.ttft is not None
        outcome.tbt = gaps_sum / gaps_n if gaps_n else None
        outcome.finished = clock.now()
        return outcome

    # --- observation ----------------------------------------------------------------------------
    def view(self, interval: float) -> ClusterView:
        window, self._window = self._window, []
        ttfts = [o.ttft * 1000 for o in window if o.ttft is not None]
        tbts = [o.tbt * 1000 for o in window if o.tbt is not None]
        own = [o.prefill_ttft * 1000 for o in window if o.prefill_ttft is not None]
        prompt = sum(i.engine.stats.prompt_tokens for i in self.instances.values() if i.role == "prefill")
        gen = sum(i.engine.stats.generation_tokens for i in self.instances.values() if i.role == "decode")
        last_prompt, last_gen = self._last_tokens
        self._last_tokens = (prompt, gen)
        prefills = [i.engine.stats for i in self.instances.values() if i.role == "prefill"]
        queries, hits = sum(s.prefix_queries for s in prefills), sum(s.prefix_hits for s in prefills)
        last_queries, last_hits = self._last_prefix
        self._last_prefix = (queries, hits)
        prefilled, self._prefilled = self._prefilled, 0
        decodes = [i for i in self.instances.values() if i.role == "decode" and i.state == "ready"]
        return ClusterView(
            ts=clock.now(),
            prefill=self.count("prefill"),
            decode=self.count("decode"),
            ready_prefill=len(self.ready("prefill")),
            ready_decode=len(decodes),
            busy=self.busy,
            ttft_p95_ms=quantile(ttfts, 0.95) if ttfts else None,
            tbt_p95_ms=quantile(tbts, 0.95) if tbts else None,
            prefill_ttft_p95_ms=quantile(own, 0.95) if own else None,
            prefill_waiting=float(sum(i.engine.scheduler.num_waiting for i in self.ready("prefill"))),
            decode_waiting=float(sum(i.engine.scheduler.num_waiting for i in decodes)),
            decode_kv_usage=sum(i.engine.scheduler.kv_usage for i in decodes) / len(decodes)
            if decodes
            else None,
            prompt_tps=max(0, prompt - last_prompt) / interval,
            gen_tps=max(0, gen - last_gen) / interval,
            finished=len(window),
            prefill_hit_rate=(hits - last_hits) / (queries - last_queries)
            if queries > last_queries
            else None,
            prefill_requests_ps=prefilled / interval,
            decode_requests_ps=len(window) / interval,
            decode_running=float(sum(i.engine.scheduler.num_running for i in decodes)),
        )

    # --- a run ----------------------------------------------------------------------------------
    async def run(
        self, trace: list[SimRequest], controller: Controller | None = None, tick: float = 5.0
    ) -> None:
        for role, count in (("prefill", self.initial[0]), ("decode", self.initial[1])):
            for _ in range(count):
                self._spawn(role, 0.0)
        self.timeline.append((0.0, *self.initial, "start"))
        start = clock.now()
        done = asyncio.Event()
        pending = len(trace)

        async def one(req: SimRequest) -> None:
            nonlocal pending
            await asyncio.sleep(max(0.0, start + req.at - clock.now()))
            outcome = await self.serve(req, start + req.at)
            outcome.at = req.at
            self.outcomes.append(outcome)
            self._window.append(outcome)
            pending -= 1
            if pending == 0:
                done.set()

        async def control() -> None:
            assert controller is not None
            while not done.is_set():
                await asyncio.sleep(tick)
                view = self.view(tick)
                target = controller(view)
                if isinstance(target, Stage):
                    if not self.busy:
                        self.stage(target)
                    continue
                if target is not None and not self.busy and target != (view.prefill, view.decode):
                    task = asyncio.get_running_loop().create_task(self.apply(target, "controller"))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)

        requests = [asyncio.get_running_loop().create_task(one(r)) for r in trace]
        controls = asyncio.get_running_loop().create_task(control()) if controller is not None else None
        if trace:
            await done.wait()
        await asyncio.gather(*requests)
        if controls is not None:
            controls.cancel()
        for task in list(self._tasks):
            task.cancel()
        for instance in list(self.instances.values()):
            await instance.engine.scheduler.close()


def run_trace(
    trace: list[SimRequest],
    prefill: int,
    decode: int,
    *,
    cfg: PerfConfig | None = None,
    controller: Controller | None = None,
    tick: float = 5.0,
    budget: int | None = None,
    model_load_seconds: float = 30.0,
    keep_gaps: bool = False,
    in_place: bool = False,
    drain_timeout: float = 120.0,
    fail_moves: bool = False,
) -> SimCluster:
    """Run a trace to its end on a fresh virtual-clock loop; the cluster holds outcomes and counts."""
    from sandbox.sim.loop import run_virtual

    cluster = SimCluster(
        prefill,
        decode,
        cfg,
        budget=budget,
        model_load_seconds=model_load_seconds,
        keep_gaps=keep_gaps,
        in_place=in_place,
        drain_timeout=drain_timeout,
        fail_moves=fail_moves,
    )
    run_virtual(cluster.run(trace, controller, tick))
    return cluster
