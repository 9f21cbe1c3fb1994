"""The rebalancing benchmark's baselines beside the static splits: the simple reactive rule, and a
re-implementation faithful to Dynamo's SLA planner.

Dynamo's SLA planner, as its docs and source describe it (ai-dynamo/dynamo, the stored versions:
``docs/architecture/sla_planner.md`` at f9eb7ad,
``components/planner/src/dynamo/planner/utils/planner_core.py`` at b6f3161, ``Planner.observe_metrics``
/ ``make_adjustments``, ``.../utils/load_predictor.py``, defaults in
``.../defaults.py``), every ``adjustment_interval``:

1. observes over the last interval the request count, mean ISL and OSL, mean TTFT, mean ITL and mean
   request duration (its frontend's metrics);
2. corrects: ``p_correction = ttft / interpolate_ttft(isl)``, ``d_correction = itl / interpolate_itl(
   concurrency = num_req / decodes × duration / interval, context = isl + osl / 2)``;
3. predicts the next interval's num_req, ISL and OSL: here the **constant** predictor ("assumes next load
   equals current load", ``load-predictor: constant``; ARIMA, the default, and Prophet are not
   re-implemented);
4. sizes prefill ``ceil(num_req × isl / interval × min(1, p_correction) / thpt_per_gpu(isl))`` and decode
   ``ceil(num_req × osl / interval / best_thpt_per_gpu(itl_sla / d_correction, isl + osl / 2))``, both
   at least ``min_endpoint`` (1); above ``max_gpu_budget`` both are scaled by budget / total and decode
   takes what prefill leaves.

"Profiled" per-instance figures are what Dynamo's pre-deployment profiler would measure on the
simulator's engine, computed from its step-time model (``perfmodel/model/scheduler.py``): a prefill
instance computes ``max_num_batched_tokens`` per step at ``step_overhead + prefill_ms_per_token × n``
ms; a decode batch of b costs ``step_overhead + decode_step + decode_ms_per_seq × b`` ms per token,
with b bounded by ``max_num_seqs`` and the KV blocks the context takes.

Two deviations, both forced by the benchmark's fixed pool of instances: the interval is 30 s (Dynamo's
default is 180 s, configurable; 180 s would act once or twice per run), and a split under the budget
gets the spare instances in its own ratio (the same proportional rule Dynamo's budget clamp applies
above it), since an idle instance in a fixed pool serves nobody.
"""

from __future__ import annotations

import math

from perfmodel.model.config import PerfConfig
from perfmodel.sim.cluster import ClusterView, SimCluster, SimRequest


class Reactive:
    """The simple reactive rule: ±1 instance per 5 s tick on queue / KV-usage thresholds after a 3-tick
    grace; at the budget an up-move takes the instance from the other role."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.streaks = {"p_up": 0, "d_up": 0}

    def __call__(self, view: ClusterView) -> tuple[int, int] | None:
        if view.busy:
            return None
        p_queue = view.prefill_waiting / max(1, view.ready_prefill)
        kv = view.decode_kv_usage or 0.0
        self.streaks["p_up"] = self.streaks["p_up"] + 1 if p_queue > 2.0 else 0
        self.streaks["d_up"] = (
            self.streaks["d_up"] + 1 if kv > 0.8 or view.decode_waiting > 4 * view.ready_decode else 0
        )
        p, d = view.prefill, view.decode
        total = p + d
        if self.streaks["p_up"] >= 3 and self.streaks["p_up"] >= self.streaks["d_up"]:
            self.streaks = {"p_up": 0, "d_up": 0}
            if total < self.budget:
                return (p + 1, d)
            return (p + 1, d - 1) if d > 1 else None
        if self.streaks["d_up"] >= 3:
            self.streaks = {"p_up": 0, "d_up": 0}
            if total < self.budget:
                return (p, d + 1)
            return (p - 1, d + 1) if p > 1 else None
        return None


# --- the profile Dynamo's planner interpolates -----------------------------------------------------
def prefill_ttft_s(cfg: PerfConfig, isl: float) -> float:
    """TTFT of one request of ``isl`` tokens alone on a prefill instance (chunks of the batch budget)."""
    steps = max(1, math.ceil(isl / cfg.max_num_batched_tokens))
    return (steps * cfg.step_overhead_ms + cfg.prefill_ms_per_token * isl) / 1000


def prefill_thpt(cfg: PerfConfig, isl: float) -> float:
    """Prompt tokens per second one prefill instance computes at this ISL (single-batched)."""
    isl = max(1.0, isl)
    return isl / prefill_ttft_s(cfg, isl)


def decode_itl_s(cfg: PerfConfig, batch: float) -> float:
    return (cfg.step_overhead_ms + cfg.decode_step_ms + cfg.decode_ms_per_seq * max(1.0, batch)) / 1000


def decode_best_thpt(cfg: PerfConfig, itl_s: float, context: float) -> float:
    """Dynamo's ``find_best_throughput_per_gpu``: tokens/s at the largest batch whose ITL meets ``itl_s``
    and whose KV fits (the smallest batch when none does)."""
    kv_limit = cfg.num_gpu_blocks * cfg.block_size // max(1, math.ceil(context))
    best = 1
    for batch in range(1, max(1, min(cfg.max_num_seqs, kv_limit)) + 1):
        if decode_itl_s(cfg, batch) <= itl_s:
            best = batch
    return best / decode_itl_s(cfg, best)


def engine_profile(cfg: PerfConfig, trace: list[SimRequest], tbt_ms: float) -> tuple[float, float]:
    """The per-instance throughputs a profile of the engine gives at the workload's mean shape, from the
    same step-time model Dynamo's planner interpolates: uncached prompt tokens/s one prefill instance
    computes (``prefill_thpt`` at the mean uncached prompt), and tokens/s one decode instance generates
    within ``tbt_ms`` (``decode_best_thpt`` at the mean context ``isl + osl / 2``). These are the
    planner's ``prefill_tokens_per_s`` and ``decode_tokens_per_s``."""
    if not trace:
        return prefill_thpt(cfg, 1.0), decode_best_thpt(cfg, tbt_ms / 1000, 1.0)
    n = len(trace)
    uncached = sum(r.prompt_len - (r.prefix_len if r.prefix >= 0 else 0) for r in trace) / n
    context = sum(r.prompt_len + r.output_len / 2 for r in trace) / n
    return prefill_thpt(cfg, uncached), decode_best_thpt(cfg, tbt_ms / 1000, context)


class DynamoSLA:
    """Dynamo's SLA planner (constant predictor), acting every ``interval`` seconds; see the module."""

    def __init__(
        self,
        cluster: SimCluster,
        trace: list[SimRequest],
        budget: int,
        ttft_ms: float,
        itl_ms: float,
        interval: float = 30.0,
        min_endpoint: int = 1,
    ) -> None:
        self.cluster, self.budget, self.interval = cluster, budget, interval
        self.cfg = cluster.cfg
        self.ttft_sla, self.itl_sla = ttft_ms / 1000, itl_ms / 1000
        self.min_endpoint = min_endpoint
        self.requests = {r.at: r for r in trace}
        self.seen = 0  # outcomes already observed
        self.last: float | None = None
        self.p_correction = self.d_correction = 1.0
        self.decisions: list[tuple[float, int, int]] = []

    def _observe(self) -> tuple[float, float, float, float | None, float | None, float] | None:
        """num_req, isl, osl, mean TTFT, mean ITL, mean duration over the interval (None: no traffic)."""
        window = self.cluster.outcomes[self.seen :]
        self.seen = len(self.cluster.outcomes)
        done = [o for o in window if o.ok]
        if not done:
            return None
        n = len(done)
        isl = sum(self.requests[o.at].prompt_len for o in done) / n
        osl = sum(self.requests[o.at].output_len for o in done) / n
        ttfts = [o.ttft for o in done if o.ttft is not None]
        itls = [o.tbt for o in done if o.tbt is not None]
        ttft = sum(ttfts) / len(ttfts) if ttfts else None
        itl = sum(itls) / len(itls) if itls else None
        duration = sum(o.finished - o.at for o in done) / n
        return float(n), isl, osl, ttft, itl, duration

    def __call__(self, view: ClusterView) -> tuple[int, int] | None:
        if self.last is None:
            self.last = view.ts
        if view.ts - self.last < self.interval - 1e-6:
            return None
        self.last = view.ts
        observed = self._observe()
        if observed is None:
            return None  # "no active requests, skipping adjustment"
        num_req, isl, osl, ttft, itl, duration = observed  # the constant predictor: next = last
        if ttft is not None:
            self.p_correction = ttft / prefill_ttft_s(self.cfg, isl)
        if itl is not None:
            concurrency = num_req / max(1, view.decode) * duration / self.interval
            self.d_correction = itl / decode_itl_s(self.cfg, concurrency)
        load = num_req * isl / self.interval * min(1.0, self.p_correction)
        p = math.ceil(load / prefill_thpt(self.cfg, isl))
        corrected_itl = self.itl_sla / self.d_correction if self.d_correction > 0 else self.itl_sla
        thpt = decode_best_thpt(self.cfg, corrected_itl, isl + osl / 2)
        d = math.ceil(num_req * osl / self.interval / thpt)
        p, d = max(p, self.min_endpoint), max(d, self.min_endpoint)
        # Dynamo's budget clamp, applied both ways in a fixed pool (see the module's docstring).
        scale = self.budget / (p + d)
        p = min(self.budget - self.min_endpoint, max(self.min_endpoint, round(p * scale)))
        d = self.budget - p
        self.decisions.append((view.ts, p, d))
        return (p, d)
