"""What a controller of a simulated cluster sees at a tick: per-role counts, latency quantiles over the last
interval, queues, KV use, token rates and the prefix-cache hit rate, like the telemetry Tandem collects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfmodel.model import clock
from perfmodel.model.stats import quantile
from perfmodel.sim.types import ClusterView

if TYPE_CHECKING:
    from perfmodel.sim.cluster import SimCluster


def view(cluster: SimCluster, interval: float) -> ClusterView:
    """What a controller sees after ``interval`` seconds (and the start of the next interval)."""
    window, cluster._window = cluster._window, []
    ttfts = [o.ttft * 1000 for o in window if o.ttft is not None]
    tbts = [o.tbt * 1000 for o in window if o.tbt is not None]
    own = [o.prefill_ttft * 1000 for o in window if o.prefill_ttft is not None]
    prompt = sum(i.engine.stats.prompt_tokens for i in cluster.instances.values() if i.role == "prefill")
    gen = sum(i.engine.stats.generation_tokens for i in cluster.instances.values() if i.role == "decode")
    last_prompt, last_gen = cluster._last_tokens
    cluster._last_tokens = (prompt, gen)
    prefills = [i.engine.stats for i in cluster.instances.values() if i.role == "prefill"]
    queries, hits = sum(s.prefix_queries for s in prefills), sum(s.prefix_hits for s in prefills)
    last_queries, last_hits = cluster._last_prefix
    cluster._last_prefix = (queries, hits)
    prefilled, cluster._prefilled = cluster._prefilled, 0
    decodes = [i for i in cluster.instances.values() if i.role == "decode" and i.state == "ready"]
    return ClusterView(
        ts=clock.now(),
        prefill=cluster.count("prefill"),
        decode=cluster.count("decode"),
        ready_prefill=len(cluster.ready("prefill")),
        ready_decode=len(decodes),
        busy=cluster.busy,
        ttft_p95_ms=quantile(ttfts, 0.95) if ttfts else None,
        tbt_p95_ms=quantile(tbts, 0.95) if tbts else None,
        prefill_ttft_p95_ms=quantile(own, 0.95) if own else None,
        prefill_waiting=float(sum(i.engine.scheduler.num_waiting for i in cluster.ready("prefill"))),
        decode_waiting=float(sum(i.engine.scheduler.num_waiting for i in decodes)),
        decode_kv_usage=sum(i.engine.scheduler.kv_usage for i in decodes) / len(decodes) if decodes else None,
        prompt_tps=max(0, prompt - last_prompt) / interval,
        gen_tps=max(0, gen - last_gen) / interval,
        finished=len(window),
        prefill_hit_rate=(hits - last_hits) / (queries - last_queries) if queries > last_queries else None,
        prefill_requests_ps=prefilled / interval,
        decode_requests_ps=len(window) / interval,
        decode_running=float(sum(i.engine.scheduler.num_running for i in decodes)),
    )
