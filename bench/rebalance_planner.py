"""Rebalancing under a fixed budget of 8 instances, on the virtual-clock simulator (the sandbox's own
engine performance model): every static split, a Dynamo-style reactive rule, and Tandem's planner.

This compares mechanisms as much as policies (the reactive rule pays a model load per move where
``tandem-ip`` switches in place, drains may run 120 s, a failed switch is retried, W2's peak needs more
than 8 instances, and Tandem's settings were chosen on these three workloads). The fair comparison, one
mechanism for every policy, the product's drain timeout and failure semantics, a Dynamo SLA-planner
baseline, seeds with intervals and held-out workloads, is bench/rebalance_fair.py
(docs/rebalancing-bench.md).

Workloads (the lengths are the issue's; rates, phases and periods are ours, chosen as follows):

- W1 mix shift, four phases of --phase seconds (default 10 minutes; a real mix shift, e.g. a batch of
  document questions during office hours, lasts longer, so this is the harder case for a planner that
  pays a model load per move): chat (12 req/s, ISL≈1k / OSL≈300, each prompt opening with one of 16
  system prompts of 512 tokens, as a service hosting several assistants) alternating with RAG (2 req/s,
  ISL≈8k / OSL≈200, no shared prefix). The base rates load both phases alike: at scale 1 chat generates
  3.6k tok/s (1.6 decode instances at the 2.2k tok/s one serves) and RAG computes 16k prompt tok/s (1.3
  prefill instances at 12.5k tok/s each), so neither phase is negligible nor favoured by construction.
- W2 sinusoidal long prompts: ISL 8000 / OSL 1000, the rate swinging 1 → 8 → 1 req/s over one period of
  --duration seconds; "peak" requests are those sent while the rate is above 6 req/s.
- W3 steady chat: 4 req/s, ISL≈1k / OSL≈300, one 512-token system prompt.

Prints per policy: SLO attainment (share of requests meeting both TTFT and TBT targets) at the base
rate, goodput (DistServe: the highest rate, as a multiple of the base rate, at which ≥ 90 % of requests
meet both; bisection over the workload's grid, W1 0.5 … 4.0 in steps of 0.25), role changes and failed
requests at the base rate, requests lost to rebalancing over every rate tried; W2 also TTFT attainment
at the peak, W3 role changes per 10 simulated minutes. Every policy but the static splits starts at
4P/4D. Restart-based moves cost --model-load seconds before the new instance is Ready, and a ratio change
is executed one instance at a time. Tandem runs three times: ``tandem`` with restart-based moves (vLLM), and
``tandem-ip`` with in-place switches (MindIE, SGLang with Mooncake): out of routing, drained, then the
sandbox's link teardown, role switch and link set-up times, no model load; its moves are staged (the
donors leave routing at the breach's first interval and drain while it is confirmed); ``tandem-ip2`` is
``tandem-ip`` with its interval at the telemetry's 2 s and a 10 s cooldown (``FAST``). The Dynamo-style
rule scales replicas, so its moves are restart-based. Then the planner's tick time (snapshot →
observation → decision) for a 64-instance topology.

    .venv/bin/python bench/rebalance_planner.py [--duration 600] [--phase 600] [--workers 2] [--quick]

--quick (for iterating; its figures are not the benchmark's) runs W1 with 5-minute phases and W2/W3
for 300 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rebalance_baselines import Reactive
from rebalance_workloads import SCALES, WORKLOADS, w1

from perfmodel.model.config import PerfConfig
from perfmodel.sim.cluster import ClusterView, Outcome, SimCluster, Stage, run_trace
from perfmodel.sim.evaluate import attainment
from rebalancing.observe import observation_from_snapshot
from rebalancing.policy import Limits, Observation, Params, State, after_move, decide

BUDGET = 8
TTFT_MS = 1500.0
TBT_MS = 50.0
TICK = 5.0
# ``tandem-ip2``: the in-place planner set for cheap moves, as an operator would for MindIE or SGLang:
# its interval at the telemetry's own collection interval (TELEMETRY_INTERVAL_SECONDS, 2 s by default)
# and a 10 s cooldown (a move's cooldown is still at least what the move took plus two settling
# intervals). Every other policy runs the defaults (interval 5 s, cooldown 30 s).
FAST = {"interval_seconds": 2.0, "cooldown_seconds": 10.0}
LIMITS = Limits(prefill_min=1, prefill_max=7, decode_min=1, decode_max=7, budget=BUDGET)
# The sandbox's defaults except the KV cache: 32768 blocks of 16 tokens (~60 GB of a small model's KV on an
# 80 GB accelerator), so an 8k-token request does not exhaust a decode instance on its own.
PERF = PerfConfig(num_gpu_blocks=32768)
# What the planner assumes a move costs before it has seen one: about what an in-place switch took in
# the sandbox (rebalancing/tests/test_in_place_sandbox.py: 1.3 s on MindIE).
IN_PLACE_FIRST_GUESS = 1.5


# A sustained breach is judged by these rules: they move, or hold saying why no move helps (both roles
# short, no donor can be spared, the queue already clears by itself).
JUDGED = ("ttft_breach", "tbt_breach", "demand_split", "both_breached", "backlog_draining", "stage")


# --- controllers ------------------------------------------------------------------------------------
class Tandem:
    """Tandem's planner: rebalancing.policy.decide on the same observation the live planner builds."""

    def __init__(self, model_load: float, in_place: bool = False, **params: float | bool) -> None:
        self.in_place = in_place
        self.limits = LIMITS  # a caller with another budget replaces it
        self.params = Params(**{"interval_seconds": TICK, **params})
        self.state = State(last_move_seconds=model_load)
        self.model_load = model_load
        self.move_started: float | None = None
        self.decision_lags: list[float] = []  # sustained breach → the move it caused
        # sustained breach (once the planner is free: no move running, no cooldown) → the first decision
        # that judges it: a move, or a hold that says why no move helps
        self.answer_lags: list[float] = []
        self.free_since: float | None = None
        self.breach_since: float | None = None
        self.answered = False
        self.log: list[str] = []  # acting decisions: "ts rule: explanation"
        # a breach first seen at t is sustained at t + this (its last confirming interval)
        self.confirm_seconds = (self.params.breach_intervals - 1) * self.params.interval_seconds

    def __call__(self, view: ClusterView) -> tuple[int, int] | Stage | None:
        if self.move_started is not None and not view.busy:
            self.state = replace(self.state, last_move_seconds=view.ts - self.move_started)
            self.move_started = None
        obs = Observation(
            ts=view.ts,
            prefill=view.prefill,
            decode=view.decode,
            ttft_p95_ms=view.ttft_p95_ms,
            tbt_p95_ms=view.tbt_p95_ms,
            ttft_target_ms=TTFT_MS,
            tbt_target_ms=TBT_MS,
            prefill_waiting=view.prefill_waiting,
            decode_waiting=view.decode_waiting,
            decode_kv_usage=view.decode_kv_usage,
            prompt_tps=view.prompt_tps,
            gen_tps=view.gen_tps,
            busy="a move is in progress" if view.busy else "",
            prefill_ttft_p95_ms=view.prefill_ttft_p95_ms,
            prefill_hit_rate=view.prefill_hit_rate,
            prefill_requests_ps=view.prefill_requests_ps,
            decode_requests_ps=view.decode_requests_ps,
            prefill_ready=view.ready_prefill,
            decode_ready=view.ready_decode,
            in_place=self.in_place,
        )
        breached = (obs.ttft_p95_ms or 0) > TTFT_MS or (obs.tbt_p95_ms or 0) > TBT_MS
        if breached and self.breach_since is None:
            self.breach_since = view.ts
        if not breached:
            self.breach_since = None
            self.answered = False
        verdict, self.state = decide(obs, self.params, self.limits, self.state)
        waiting = verdict.rule in ("busy", "cooldown")  # the planner may not act now, by design
        if waiting:
            self.free_since = None
        elif self.free_since is None:
            self.free_since = view.ts
        if verdict.rule in JUDGED and self.breach_since is not None and not self.answered and not waiting:
            sustained_at = self.breach_since + self.confirm_seconds
            self.answer_lags.append(max(0.0, view.ts - max(sustained_at, self.free_since or view.ts)))
            self.answered = True
        if verdict.prepares:
            self.log.append(f"{view.ts:7.1f} {verdict.rule}: {verdict.explanation}")
            return Stage(verdict.prefill, verdict.decode, unstage=verdict.action == "unstage")
        if not verdict.acts:
            return None
        if self.breach_since is not None:
            sustained_at = self.breach_since + self.confirm_seconds
            self.decision_lags.append(max(0.0, view.ts - sustained_at))
            self.breach_since = None
            self.answered = False
        self.move_started = view.ts
        self.log.append(f"{view.ts:7.1f} {verdict.rule}: {verdict.explanation}")
        self.state = after_move(self.state, verdict, view.ts, self.state.last_move_seconds)
        return (verdict.prefill, verdict.decode)


# --- runs -------------------------------------------------------------------------------------------
@dataclass
class Row:
    workload: str
    policy: str
    attainment: float
    goodput: float  # × base rate
    role_changes: int
    failed: int
    failed_by_rebalancing: int
    peak_ttft: float | None
    decision_lag: float | None
    answer_lag: float | None
    wall: float


def _controller(policy: str, model_load: float):  # type: ignore[no-untyped-def]
    if policy == "dynamo":
        return Reactive(BUDGET)  # the Dynamo-style reactive rule
    if policy == "tandem":
        return Tandem(model_load)
    if policy == "tandem-ip":
        return Tandem(IN_PLACE_FIRST_GUESS, in_place=True)
    if policy == "tandem-ip2":
        return Tandem(IN_PLACE_FIRST_GUESS, in_place=True, **FAST)
    return None


def _split(policy: str) -> tuple[int, int]:
    if policy.startswith("static"):
        p = int(policy.split("-")[1])
        return p, BUDGET - p
    return 4, 4


def _peak_ttft(outcomes: list[Outcome]) -> float | None:
    peak = [o for o in outcomes if o.kind == "peak"]
    if not peak:
        return None
    return sum(1 for o in peak if o.ok and o.ttft is not None and o.ttft * 1000 <= TTFT_MS) / len(peak)


def evaluate(args: tuple[str, str, float, float, float]) -> Row:
    """Attainment and role changes at the base rate, then goodput: the highest scale on the workload's
    grid with ≥ 90 % attainment, found by bisection (attainment falls as the rate rises)."""
    workload, policy, duration, model_load, phase = args
    started = time.perf_counter()
    grid = SCALES[workload]
    lags: list[float] = []
    answers: list[float] = []
    lost = 0
    seen: dict[float, float] = {}

    def run(scale: float) -> SimCluster:
        nonlocal lost
        controller = _controller(policy, model_load)
        if workload == "W1":
            trace = w1(scale, 4 * phase, phase=phase)
        else:
            trace = WORKLOADS[workload](scale, duration)
        cluster = run_trace(
            trace,
            *_split(policy),
            controller=controller,
            tick=FAST["interval_seconds"] if policy == "tandem-ip2" else TICK,
            budget=BUDGET,
            model_load_seconds=model_load,
            cfg=PERF,
            in_place=policy.startswith("tandem-ip"),
        )
        if isinstance(controller, Tandem):
            lags.extend(controller.decision_lags)
            answers.extend(controller.answer_lags)
        lost += cluster.failed_by_rebalancing
        seen[scale] = attainment(cluster.outcomes, TTFT_MS, TBT_MS).both
        return cluster

    base = run(1.0)
    result = attainment(base.outcomes, TTFT_MS, TBT_MS)
    lo, hi = -1, len(grid)  # grid[lo] passes (or nothing does), grid[hi] fails (or everything does)
    index = grid.index(1.0)
    if result.both >= 0.9:
        lo = index
    else:
        hi = index
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if grid[mid] not in seen:
            run(grid[mid])
        if seen[grid[mid]] >= 0.9:
            lo = mid
        else:
            hi = mid
    return Row(
        workload,
        policy,
        result.both,
        grid[lo] if lo >= 0 else 0.0,
        base.role_changes,
        result.failed,
        lost,
        _peak_ttft(base.outcomes),
        statistics.median(lags) if lags else None,
        statistics.median(answers) if answers else None,
        time.perf_counter() - started,
    )


def tick_time(instances: int = 64, repeat: int = 2000) -> tuple[float, float]:
    """Median and p99 ms of one planner tick (snapshot → observation → decision) for N instances."""
    pods = [
        {
            "name": f"p-{i}",
            "role": "prefill" if i < instances // 2 else "decode",
            "waiting": 1.0,
            "kv_usage": 0.4,
        }
        for i in range(instances)
    ]
    links = [
        {"prefill": f"p-{i}", "decode": f"p-{j}", "state": "up"}
        for i in range(instances // 2)
        for j in range(instances // 2, instances)
    ]
    snapshot = {
        "roles": {"prefill": {"waiting": 40.0, "kv_usage": 0.3}, "decode": {"waiting": 3.0, "kv_usage": 0.5}},
        "slo": {"ttft_p95_ms": 2400.0, "tbt_p95_ms": 20.0},
        "totals": {"prompt_tps": 1e5, "gen_tps": 2e4},
        "links": links,
        "pods": pods,
        "health": {"state": "healthy"},
    }
    limits = Limits(prefill_min=1, prefill_max=63, decode_min=1, decode_max=63, budget=instances)
    params = Params()
    state = State()
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        obs = observation_from_snapshot(
            snapshot,
            prefill=instances // 2,
            decode=instances // 2,
            ttft_target_ms=TTFT_MS,
            tbt_target_ms=TBT_MS,
            busy="",
            now=5.0 * i,
        )
        _, state = decide(obs, params, limits, state)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.99 * len(times))]


def _compare(tandem: Row, best_static: Row, dynamo: Row, simulated: float) -> None:
    ratio_static = tandem.goodput / best_static.goodput if best_static.goodput else float("inf")
    ratio_dynamo = tandem.goodput / dynamo.goodput if dynamo.goodput else float("inf")
    peak = f", peak TTFT attainment {tandem.peak_ttft:.1%}" if tandem.peak_ttft is not None else ""
    print(
        f"  {tandem.policy}: goodput {tandem.goodput:.2f}× base vs best static ({best_static.policy}) "
        f"{best_static.goodput:.2f}×: ratio {ratio_static:.2f}; vs Dynamo-style {dynamo.goodput:.2f}×: "
        f"ratio {ratio_dynamo:.2f}{peak}"
    )
    per10 = tandem.role_changes / (simulated / 600)
    lag = f"{tandem.decision_lag:.1f} s" if tandem.decision_lag is not None else "n/a"
    answer = f"{tandem.answer_lag:.1f} s" if tandem.answer_lag is not None else "n/a"
    print(
        f"  {tandem.policy}: role changes per 10 simulated min {per10:.1f}; median lag from a sustained "
        f"breach to the move it caused (busy/cooldown included): {lag}; once the planner is free (no move "
        f"running, no cooldown), to the first decision judging it (a move, or a hold saying why none "
        f"helps): {answer}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0, help="simulated seconds per run")
    parser.add_argument(
        "--model-load", type=float, default=30.0, help="seconds before a new instance is Ready"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--phase", type=float, default=600.0, help="W1: seconds per phase (the run is four phases)"
    )
    parser.add_argument("--workloads", default="W1,W2,W3")
    parser.add_argument("--policies", default="", help="comma-separated subset, e.g. static-4,tandem")
    parser.add_argument("--quick", action="store_true", help="shorter runs, for iterating")
    args = parser.parse_args()
    if args.quick:
        args.phase, args.duration = 300.0, 300.0
    policies = [f"static-{p}" for p in range(1, BUDGET)] + ["dynamo", "tandem", "tandem-ip", "tandem-ip2"]
    if args.policies:
        policies = [p for p in policies if p in args.policies.split(",")]
    jobs = [
        (w, p, args.duration, args.model_load, args.phase)
        for w in args.workloads.split(",")
        for p in policies
    ]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = []
        for row in pool.map(evaluate, jobs):
            rows.append(row)
            print(f"  done {row.workload} {row.policy} in {row.wall:.0f} s", file=sys.stderr, flush=True)
    print(
        f"budget {BUDGET} instances, SLO TTFT ≤ {TTFT_MS:g} ms and TBT ≤ {TBT_MS:g} ms, {args.duration:g} s "
        f"simulated per W2/W3 run, W1 four phases of {args.phase:g} s, model load {args.model_load:g} s, "
        f"tick {TICK:g} s ({FAST['interval_seconds']:g} s for tandem-ip2); "
        f"wall {time.perf_counter() - started:.0f} s"
    )
    header = (
        f"{'load':<5}{'policy':<10}{'attain':>8}{'goodput×':>10}{'changes':>9}{'failed':>8}{'by rebal':>9}"
        f"{'W2 peak TTFT':>14}"
    )
    for workload in args.workloads.split(","):
        print()
        print(header)
        group = [r for r in rows if r.workload == workload]
        for r in group:
            peak = f"{r.peak_ttft:.1%}" if r.peak_ttft is not None else "-"
            print(
                f"{r.workload:<5}{r.policy:<10}{r.attainment:>8.1%}{r.goodput:>10.2f}{r.role_changes:>9}"
                f"{r.failed:>8}{r.failed_by_rebalancing:>9}{peak:>14}"
            )
        statics = [r for r in group if r.policy.startswith("static")]
        dynamo = next((r for r in group if r.policy == "dynamo"), None)
        if not statics or dynamo is None:
            continue  # a subset of the policies: no comparison
        best_static = max(statics, key=lambda r: (r.goodput, r.attainment))
        if workload == "W2":
            peaks = [r for r in statics if r.peak_ttft is not None]
            if peaks:
                top = max(peaks, key=lambda r: r.peak_ttft or 0.0)
                print(
                    f"  W2 peak TTFT attainment: best static split ({top.policy}) {top.peak_ttft or 0.0:.1%}"
                )
        for tandem in (r for r in group if r.policy.startswith("tandem")):
            _compare(tandem, best_static, dynamo, 4 * args.phase if workload == "W1" else args.duration)
    median, p99 = tick_time()
    print()
    print(
        f"planner tick for 64 instances (snapshot → observation → decision): median {median:.3f} ms, "
        f"p99 {p99:.3f} ms"
    )


if __name__ == "__main__":
    main()
