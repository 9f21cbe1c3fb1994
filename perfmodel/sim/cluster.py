"""A simulated P/D cluster on the virtual clock: the performance model's engines (``perfmodel.model``), the
router's pod choice, and role changes.

Each request goes the way the router sends it (``perfmodel.sim.flow``): a prefill instance computes the
prompt and holds its KV, then a decode instance pulls the KV over its link (``ModelEngine._pull``: bytes /
bandwidth + latency, one transfer per link at a time) and generates. A controller called every ``tick``
seconds may ask for another split; the cluster reaches it one instance at a time, like Tandem does:
while the budget has room the growing role gains an instance first (Ready after
``model_load_seconds``), otherwise the shrinking role gives one up first; an instance being removed
takes no new requests and finishes its in-flight ones (bounded by ``drain_timeout``) before it goes.

Drains and failures are the product's: ``drain_timeout`` defaults to the executor's drain timeout and
``fail_moves`` to its failure semantics (``rebalancing.inplace.DRAIN_TIMEOUT_SECONDS`` and
``FAILED_SWITCH_FAILS_MOVE``: a switch whose drain outlasts the timeout fails the whole move, nothing retries
it). ``fail_moves=False`` is the old benchmark's behaviour (a failed switch is skipped and the move retried).

With ``in_place`` (engines that switch a running instance's role: MindIE, SGLang with Mooncake), an
opposing move takes an instance of the shrinking role out of routing, drains it the same way, then
switches it: its links torn down and set up again with the other role's instances and the switch
itself (the model's ``link_teardown_ms``, ``link_setup_ms`` and ``role_switch_ms``), after which it
serves the other role with an empty prefix cache. No model load; a drain that times out cancels the
switch and the instance serves its old role again, as Tandem's executor does.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

from perfmodel.model import clock
from perfmodel.model.config import PerfConfig
from perfmodel.model.engine import ModelEngine
from perfmodel.model.routing import AffinityTable
from perfmodel.sim.flow import serve as serve_request
from perfmodel.sim.observe import view as observe
from perfmodel.sim.types import ClusterView, Controller, Instance, Outcome, SimRequest, Stage
from rebalancing.inplace import DRAIN_TIMEOUT_SECONDS, FAILED_SWITCH_FAILS_MOVE


def _load(engine: ModelEngine) -> int:
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
        drain_timeout: float = DRAIN_TIMEOUT_SECONDS,
        keep_gaps: bool = False,
        retry_attempts: int = 2,
        in_place: bool = False,
        fail_moves: bool = FAILED_SWITCH_FAILS_MOVE,
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
        self.by_address: dict[str, ModelEngine] = {}
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
    def _lookup(self, address: str) -> ModelEngine | None:
        return self.by_address.get(address)

    def _spawn(self, role: str, load_seconds: float) -> Instance:
        index = next(self.counter)
        name = f"{role}-{index}"
        engine = ModelEngine(name, "10.0.0.1", 10000 + index, self.cfg, self._lookup)
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

    async def _drain(self, engine: ModelEngine) -> bool:
        """Wait until ``engine`` holds no request (bounded by ``drain_timeout``); whether it emptied."""
        deadline = clock.now() + self.drain_timeout
        while clock.now() < deadline:
            engine.scheduler.expire_held()
            if engine.inflight == 0 and engine.scheduler.idle() and not engine.scheduler.held:
                return True
            await asyncio.sleep(0.1)
        return False

    async def _retire(self, engine: ModelEngine) -> None:
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

    async def serve(self, req: SimRequest, arrival: float) -> Outcome:
        return await serve_request(self, req, arrival)

    def view(self, interval: float) -> ClusterView:
        return observe(self, interval)

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
    drain_timeout: float = DRAIN_TIMEOUT_SECONDS,
    fail_moves: bool = FAILED_SWITCH_FAILS_MOVE,
) -> SimCluster:
    """Run a trace to its end on a fresh virtual-clock loop; the cluster holds outcomes and counts."""
    from perfmodel.sim.loop import run_virtual

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
