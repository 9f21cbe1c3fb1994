"""The planner's evidence: policies compared under one mechanism, over seeds, on held-out workloads.

Every dynamic policy moves instances the same way, by the in-place switch the engine allows (MindIE,
SGLang with Mooncake): out of routing, drained, links torn down, role switched, links set up again, no
model load. The simulator runs the product's drain timeout (REBALANCE_DRAIN_TIMEOUT_SECONDS, 30 s,
controlplane/settings.py; rebalancing/services/inplace_start.py) and its failure semantics
(rebalancing/services/inplace.py ``_run_claimed``, engine_steps.py ``drain``): a drain that times out
fails the whole move, the instance and those not yet switched serve their old role again, and the
policy decides anew (``fail_moves``), where the old benchmark let a drain run 120 s and retried.

Policies, all starting at an even split: each static split; ``reactive`` (queue / KV-usage thresholds,
±1 per tick, bench/rebalance_baselines.py ``Reactive``); ``dynamo-sla``, Dynamo's SLA planner with its
constant load predictor, sizing prefill from predicted load and the TTFT SLA and decode from the ITL SLA
on the profiled per-instance throughput (bench/rebalance_baselines.py ``DynamoSLA``, after ai-dynamo/
dynamo docs/architecture/sla_planner.md and components/planner/src/dynamo/planner/utils/
planner_core.py); ``tandem``, rebalancing.policy.decide with its defaults (interval 5 s, cooldown 30 s)
and in-place moves, nothing tuned on the held-out workloads.

Workloads: W1 mix shift, W3 steady chat (bench/rebalance_workloads.py), W2 sinusoidal long prompts at a
budget of 10 (its peak needs 8.7 instances, so 8 could not meet its 90 % target), and the held-out H1
bursty agentic and H2 diurnal (bench/rebalance_heldout.py, committed before any policy ran on them).

Per workload, policy and seed: SLO attainment at the base rate (both TTFT ≤ 1500 ms and TBT ≤ 50 ms),
goodput (the highest scale on the workload's grid with ≥ 90 % attainment, by bisection), failed moves,
requests failed by rebalancing over every rate tried, and flaps (a move reversing the previous one's
direction within --flap-window seconds) at the base rate. Means with 95 % t-intervals over the seeds.

    nice -n 10 .venv/bin/python bench/rebalance_fair.py [--seeds 5] [--duration 300] [--phase 75]
        [--workloads W1,W2,W3,H1,H2] [--policies static-4,tandem] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rebalance_baselines import DynamoSLA, Reactive
from rebalance_heldout import HELD_OUT
from rebalance_heldout import SCALES as HELD_SCALES
from rebalance_planner import IN_PLACE_FIRST_GUESS, PERF, TBT_MS, TICK, TTFT_MS, Tandem
from rebalance_workloads import w1, w2, w3

from perfmodel.sim.cluster import Controller, SimCluster, SimRequest
from perfmodel.sim.evaluate import attainment
from perfmodel.sim.loop import run_virtual
from rebalancing.inplace import DRAIN_TIMEOUT_SECONDS as DRAIN_TIMEOUT  # the executor's
from rebalancing.policy import Limits

BUDGETS = {"W1": 8, "W2": 10, "W3": 8, "H1": 8, "H2": 8}
SCALES = {
    "W1": (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0),
    "W2": (0.5, 0.75, 1.0, 1.25),
    "W3": (1.0, 1.5, 2.0, 3.0),
    **HELD_SCALES,
}
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
THRESHOLD = 0.9


def trace(workload: str, scale: float, duration: float, phase: float, seed: int) -> list[SimRequest]:
    if workload == "W1":
        return w1(scale, 4 * phase, seed=seed, phase=phase)
    if workload == "W2":
        return w2(scale, duration, seed=seed)
    if workload == "W3":
        return w3(scale, duration, seed=seed)
    return HELD_OUT[workload](scale, duration, seed=seed)


def policies(budget: int) -> list[str]:
    return [f"static-{p}" for p in range(1, budget)] + ["reactive", "dynamo-sla", "tandem"]


def flaps(timeline: list[tuple[float, int, int, str]], window: float) -> int:
    """Moves reversing the previous move's direction (prefill growing ↔ shrinking) within ``window`` s."""
    count, last = 0, None  # last: (ts, direction)
    previous = timeline[0][1] if timeline else 0
    for ts, prefill, _decode, why in timeline[1:]:
        if why != "controller" or prefill == previous:
            previous = prefill
            continue
        direction = 1 if prefill > previous else -1
        if last is not None and direction != last[1] and ts - last[0] <= window:
            count += 1
        last, previous = (ts, direction), prefill
    return count


def simulate(workload: str, policy: str, scale: float, args: tuple[float, float, int]) -> SimCluster:
    duration, phase, seed = args
    budget = BUDGETS[workload]
    requests = trace(workload, scale, duration, phase, seed)
    split = (int(policy.split("-")[1]), budget - int(policy.split("-")[1])) if "static" in policy else None
    prefill, decode = split or (budget // 2, budget - budget // 2)
    cluster = SimCluster(
        prefill,
        decode,
        PERF,
        budget=budget,
        model_load_seconds=0.0,
        drain_timeout=DRAIN_TIMEOUT,
        in_place=True,
        fail_moves=True,
    )
    controller: Controller | None = None
    if policy == "reactive":
        controller = Reactive(budget)
    elif policy == "dynamo-sla":
        controller = DynamoSLA(cluster, requests, budget, TTFT_MS, TBT_MS)
    elif policy == "tandem":
        limits = Limits(
            prefill_min=1, prefill_max=budget - 1, decode_min=1, decode_max=budget - 1, budget=budget
        )
        tandem = Tandem(IN_PLACE_FIRST_GUESS, in_place=True)
        tandem.limits = limits
        controller = tandem
    run_virtual(cluster.run(requests, controller, TICK))
    return cluster


@dataclass
class Row:
    workload: str
    policy: str
    seed: int
    attainment: float
    goodput: float
    moves: int
    failed_moves: int
    failed_by_rebalancing: int
    flaps: int
    wall: float


def evaluate(job: tuple[str, str, int, float, float, float]) -> Row:
    workload, policy, seed, duration, phase, window = job
    started = time.perf_counter()
    grid = SCALES[workload]
    seen: dict[float, float] = {}
    lost = 0

    def run(scale: float) -> SimCluster:
        nonlocal lost
        cluster = simulate(workload, policy, scale, (duration, phase, seed))
        lost += cluster.failed_by_rebalancing
        seen[scale] = attainment(cluster.outcomes, TTFT_MS, TBT_MS).both
        return cluster

    base = run(1.0)
    lo, hi = -1, len(grid)
    if seen[1.0] >= THRESHOLD:
        lo = grid.index(1.0)
    else:
        hi = grid.index(1.0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if grid[mid] not in seen:
            run(grid[mid])
        lo, hi = (mid, hi) if seen[grid[mid]] >= THRESHOLD else (lo, mid)
    return Row(
        workload,
        policy,
        seed,
        seen[1.0],
        grid[lo] if lo >= 0 else 0.0,
        base.role_changes,
        base.failed_moves,
        lost,
        flaps(base.timeline, window),
        time.perf_counter() - started,
    )


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t-interval (0 for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, 0.0
    t = T95.get(len(values) - 1, 2.0)
    return mean, t * statistics.stdev(values) / len(values) ** 0.5


def table(rows: list[Row], workload: str) -> None:
    group = [r for r in rows if r.workload == workload]
    names = list(dict.fromkeys(r.policy for r in group))
    print(
        f"\n{workload} (budget {BUDGETS[workload]})\n"
        f"{'policy':<11}{'attainment':>18}{'goodput ×':>16}{'moves':>7}{'failed mv':>10}"
        f"{'lost':>6}{'flaps':>6}"
    )
    for name in names:
        own = [r for r in group if r.policy == name]
        a, ah = interval([r.attainment for r in own])
        g, gh = interval([r.goodput for r in own])
        print(
            f"{name:<11}{a:>10.1%} ± {ah:>4.1%}{g:>9.2f} ± {gh:>4.2f}"
            f"{statistics.fmean(r.moves for r in own):>7.1f}{sum(r.failed_moves for r in own):>10}"
            f"{sum(r.failed_by_rebalancing for r in own):>6}{sum(r.flaps for r in own):>6}"
        )


def targets(rows: list[Row], workload: str) -> list[tuple[str, bool]]:
    group = [r for r in rows if r.workload == workload]

    def mean(policy: str) -> float:
        own = [r.goodput for r in group if r.policy == policy]
        return statistics.fmean(own) if own else 0.0

    tandem = [r for r in group if r.policy == "tandem"]
    statics = {r.policy for r in group if r.policy.startswith("static")}
    if not tandem or not statics or not any(r.policy == "dynamo-sla" for r in group):
        return []
    best = max(statics, key=mean)
    out = []
    for label, base, want in (
        (f"best static ({best})", mean(best), 1.2),
        ("dynamo-sla", mean("dynamo-sla"), 1.1),
    ):
        ratio = mean("tandem") / base if base else float("inf")
        out.append(
            (f"goodput {mean('tandem'):.2f} / {label} {base:.2f} = {ratio:.2f} ≥ {want}", ratio >= want)
        )
    out.append(
        (
            f"requests failed by rebalancing {sum(r.failed_by_rebalancing for r in tandem)} = 0",
            all(r.failed_by_rebalancing == 0 for r in tandem),
        )
    )
    out.append((f"flaps {sum(r.flaps for r in tandem)} = 0", all(r.flaps == 0 for r in tandem)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=300.0, help="simulated seconds (W2, W3, H1, H2)")
    parser.add_argument("--phase", type=float, default=75.0, help="W1: seconds per phase (four phases)")
    parser.add_argument("--workloads", default="W1,W2,W3,H1,H2")
    parser.add_argument("--policies", default="", help="comma-separated subset")
    parser.add_argument("--flap-window", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    jobs = [
        (w, p, seed, args.duration, args.phase, args.flap_window)
        for w in workloads
        for p in policies(BUDGETS[w])
        if not args.policies or p in args.policies.split(",")
        for seed in range(1, args.seeds + 1)
    ]
    started = time.perf_counter()
    rows: list[Row] = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for row in pool.map(evaluate, jobs):
            rows.append(row)
            print(f"  done {row.workload} {row.policy} seed {row.seed} in {row.wall:.0f} s", file=sys.stderr)
    print(
        f"in-place moves for every policy, drain timeout {DRAIN_TIMEOUT:g} s, a failed switch fails the "
        f"move; "
        f"SLO TTFT ≤ {TTFT_MS:g} ms and TBT ≤ {TBT_MS:g} ms; {args.seeds} seeds, mean ± 95 % t-interval; "
        f"{args.duration:g} s per run (W1 four phases of {args.phase:g} s); goodput = highest scale with "
        f"≥ {THRESHOLD:.0%} attainment; lost = requests failed by rebalancing; flaps within "
        f"{args.flap_window:g} s; wall {time.perf_counter() - started:.0f} s"
    )
    for workload in workloads:
        table(rows, workload)
        for text, met in targets(rows, workload):
            held = " (held-out target)" if workload in HELD_OUT else ""
            print(f"  {'MET ' if met else 'MISSED'} {text}{held}")


if __name__ == "__main__":
    main()
