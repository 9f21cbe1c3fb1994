"""A hindsight oracle for the rebalancing benchmark: an upper-bound reference, not a policy to beat.

Every ``interval`` seconds the oracle clones the whole simulation with ``os.fork``: the child process is a
copy of the virtual-clock event loop with every request in flight, the engines' queues, batches, held KV
and prefix caches. The simulator keeps that state in suspended coroutines, which cannot be copied inside
one process, but a fork copies them whole. In each clone it switches, instantly and for free, to one
candidate split, and runs the clone ``window + tail`` simulated seconds ahead on the trace's future
arrivals. The clone counts the requests that arrived before the window's end (in flight at the fork or
arriving within the window) and met both SLOs by the horizon, sends the count back through a pipe and
exits. The parent then switches, instantly and for free, to the candidate with the highest count. Ties
go to the split nearest the current one.

What makes it stronger than any online policy: it knows the future trace, a switch costs nothing (no
drain, no link set-up, no role-switch time, no lost prefix cache: the instance keeps its caches and
finishes its in-flight work while it takes new work of its new role), and it may move any number of
instances at once, as often as every ``interval``. What keeps it from being a proof: it is greedy (it
picks the best split for the next window, not the best sequence of splits), and its choices happen at
ticks of the run (the first at the first tick, 5 s in). So its goodput is a reference for what a
perfect switcher reaches on a workload, not a bound every online policy is under.

The search: the current split first; when every request in scope already meets the SLOs there, it stays.
Otherwise every split of the budget (``search="all"``), or from the current split towards the better
neighbour while the count grows (``search="climb"``, cheaper, for quick runs).
"""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from bisect import bisect_left

from perfmodel.model import clock
from perfmodel.sim.cluster import ClusterView, SimCluster, SimRequest
from perfmodel.sim.evaluate import attainment


def switch(cluster: SimCluster, target: tuple[int, int]) -> bool:
    """Move ``cluster`` to ``target`` at once and for free: the least busy instances of the shrinking
    role take the other role (their in-flight work finishes where it is). Whether the split changed."""
    prefill = cluster.count("prefill")
    if target[0] == prefill:
        return False
    source, dest = ("decode", "prefill") if target[0] > prefill else ("prefill", "decode")
    donors = [i for i in cluster.instances.values() if i.role == source and i.state == "ready"]
    donors.sort(key=lambda i: (i.engine.inflight, i.engine.name))
    for instance in donors[: abs(target[0] - prefill)]:
        instance.role = dest
    cluster.role_changes += 1
    cluster.timeline.append((clock.now(), cluster.count("prefill"), cluster.count("decode"), "controller"))
    return True


class Oracle:
    """The hindsight oracle (see the module): a controller for ``SimCluster.run``. After the run, call
    ``finish``: in a clone it reports and exits the process, in the parent it raises what went wrong."""

    def __init__(
        self,
        cluster: SimCluster,
        trace: list[SimRequest],
        budget: int,
        ttft_ms: float,
        tbt_ms: float,
        interval: float = 10.0,
        window: float = 10.0,
        tail: float = 20.0,
        search: str = "all",
    ) -> None:
        self.cluster, self.budget = cluster, budget
        self.ttft_ms, self.tbt_ms = ttft_ms, tbt_ms
        self.interval, self.window, self.tail, self.search = interval, window, tail, search
        self.arrivals = sorted(r.at for r in trace)
        self.last: float | None = None
        self.clones = 0  # clones run (the oracle's cost)
        self.decisions: list[tuple[float, int, int, int, int]] = []  # ts, prefill, decode, met, in scope
        self.error: str | None = None
        # In a clone: where to send the count, from which outcome on, and the window's end and horizon.
        self.pipe: int | None = None
        self.seen = 0
        self.in_scope = 0
        self.scope_end = 0.0
        self.horizon = 0.0

    # --- in a clone ----------------------------------------------------------------------------------
    def met(self) -> int:
        """Requests in scope (finished since the fork, arrived before the window's end) meeting both SLOs."""
        scope = [o for o in self.cluster.outcomes[self.seen :] if o.at < self.scope_end]
        return round(attainment(scope, self.ttft_ms, self.tbt_ms).both * len(scope))

    def finish(self) -> None:
        if self.pipe is not None:  # a clone: report and leave, never returning into the caller's process
            try:
                os.write(self.pipe, str(-1 if self.error else self.met()).encode())
            finally:
                os._exit(0)
        if self.error:
            raise RuntimeError(f"the oracle failed:\n{self.error}")

    # --- in the run ------------------------------------------------------------------------------------
    def _clone(self, split: tuple[int, int]) -> int | None:
        """The count ``split`` reaches over the next window, from a clone; None in the clone itself."""
        loop = asyncio.get_running_loop()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            # asyncio ties the running loop to the process id: the clone runs the same loop, so it says so.
            asyncio._set_running_loop(loop)
            logging.getLogger("asyncio").disabled = True  # a clone ends mid-run; its tasks die unawaited
            now = clock.now()
            self.pipe, self.seen = write, len(self.cluster.outcomes)
            self.scope_end, self.horizon = now + self.window, now + self.window + self.tail
            self.in_scope = bisect_left(self.arrivals, self.scope_end) - self.seen
            switch(self.cluster, split)
            return None
        os.close(write)
        chunks = []
        while chunk := os.read(read, 64):
            chunks.append(chunk)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        self.clones += 1
        text = b"".join(chunks).decode()
        if status != 0 or not text or int(text) < 0:
            raise RuntimeError(f"a clone of the simulation failed (status {status}, answer {text!r})")
        return int(text)

    def _choose(self, current: tuple[int, int]) -> tuple[tuple[int, int], int, int] | None:
        """The best split for the next window, its count and the requests in scope (None in a clone)."""
        scope = bisect_left(self.arrivals, clock.now() + self.window) - len(self.cluster.outcomes)
        counts: dict[int, int] = {}

        def count(prefill: int) -> bool:
            value = self._clone((prefill, self.budget - prefill))
            if value is None:
                return False
            counts[prefill] = value
            return True

        if not count(current[0]):
            return None
        if counts[current[0]] < scope:
            if self.search == "all":
                for prefill in range(1, self.budget):
                    if prefill not in counts and not count(prefill):
                        return None
            else:
                for step in (-1, 1):
                    if 1 <= current[0] + step < self.budget and not count(current[0] + step):
                        return None
                up, down = counts.get(current[0] + 1, -1), counts.get(current[0] - 1, -1)
                step = 1 if up > down else -1
                prefill = current[0]
                while 1 <= prefill + step < self.budget:
                    nxt = prefill + step
                    if nxt not in counts and not count(nxt):
                        return None
                    if counts[nxt] <= counts[prefill]:
                        break
                    prefill = nxt
                    if counts[prefill] >= scope:  # every request in scope met: nothing better to find
                        break
        best = max(counts, key=lambda p: (counts[p], -abs(p - current[0])))
        return (best, self.budget - best), counts[best], scope

    def __call__(self, view: ClusterView) -> None:
        if self.pipe is not None:  # a clone: run until the horizon or every request in scope is done
            done = sum(1 for o in self.cluster.outcomes[self.seen :] if o.at < self.scope_end)
            if view.ts >= self.horizon - 1e-6 or done >= self.in_scope:
                self.finish()
            return None
        if self.error or (self.last is not None and view.ts - self.last < self.interval - 1e-6):
            return None
        self.last = view.ts
        try:
            chosen = self._choose((view.prefill, view.decode))
            if chosen is None:  # this process is a clone now: let its run go on
                return None
            split, met, scope = chosen
            switch(self.cluster, split)
            self.decisions.append((view.ts, *split, met, scope))
        except Exception:  # the run would swallow it in its control task: keep it for finish()
            self.error = traceback.format_exc()
        return None
