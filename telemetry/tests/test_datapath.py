"""Silent P/D data-path problems from counters in the real engines' shape (pure, no database)."""

from __future__ import annotations

from telemetry.datapath import PodWindow, problem_reason, problems
from telemetry.derive import TopologyOutcomes, pod_window
from telemetry.health import topology_health
from telemetry.parse import parse_metrics
from telemetry.snapshot import PodSample, Slo, empty_metrics
from telemetry.tests.exposition import counter, histogram

BASE = 'model_name="m",engine="0"'


def vllm_decode(*, local: float, cached: float, external: float, requests: int, block: int = 16) -> str:
    """vLLM 0.32's families as a decode pod prints them (loggers.py: one series per source)."""
    return "\n".join(
        [
            counter(
                "vllm:prompt_tokens_by_source",
                [
                    (f'{BASE},source="local_compute"', local),
                    (f'{BASE},source="local_cache_hit"', cached),
                    (f'{BASE},source="external_kv_transfer"', external),
                ],
            ),
            counter("vllm:prompt_tokens", [(BASE, local + cached + external)]),
            histogram("vllm:time_to_first_token_seconds", ("0.1",), [requests, requests], 0.1, BASE),
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
            "# TYPE vllm:cache_config_info gauge",
            f'vllm:cache_config_info{{block_size="{block}",engine="0",num_gpu_blocks="100"}} 1.0',
        ]
    )


def vllm_prefill(*, expired: float = 0, failed: float = 0, after_expiry: float = 0) -> str:
    """NixlConnector's counters (nixl/stats.py), labelled model_name and engine."""
    return "\n".join(
        [
            counter("vllm:nixl_num_failed_transfers", [(BASE, failed)]),
            counter("vllm:nixl_num_failed_notifications", [(BASE, 0)]),
            counter("vllm:nixl_num_kv_expired_reqs", [(BASE, expired)]),
            counter("vllm:nixl_num_notifications_after_expiry", [(BASE, after_expiry)]),
            counter("vllm:prompt_tokens", [(BASE, 0)]),
        ]
    )


def tent(*, rdma: float, tcp: float, failovers: float) -> str:
    """Mooncake TENT's /metrics (tent_metrics.cpp; yalantinglibs prints no _created lines)."""
    lines = [
        "# HELP tent_read_bytes_total Total bytes read via TENT",
        "# TYPE tent_read_bytes_total counter",
        f'tent_read_bytes_total{{transport="rdma"}} {rdma}',
        f'tent_read_bytes_total{{transport="tcp"}} {tcp}',
        "# HELP tent_transport_failover_total Total cross-transport failover events",
        "# TYPE tent_transport_failover_total counter",
        f'tent_transport_failover_total{{from="rdma",to="tcp"}} {failovers}',
    ]
    return "\n".join(lines) + "\n"


def window(before: str, after: str, name: str, role: str, block: int | None = None) -> PodWindow:
    found, _ = pod_window(parse_metrics(after, ts=12.0), parse_metrics(before, ts=10.0))
    return PodWindow(name, role, found, block)


def test_a_decode_that_receives_its_kv_computes_only_the_last_partial_blocks():
    # 4 requests of 1,003 tokens, block 128: 896 received and 107 computed each (measured on vLLM 0.32)
    before = vllm_decode(local=0, cached=0, external=0, requests=0, block=128)
    after = vllm_decode(local=4 * 107, cached=0, external=4 * 896, requests=4, block=128)
    pod = window(before, after, "decode-0", "decode", 128)
    assert problems([pod], None, 2.0) == []


def test_a_decode_that_recomputes_the_prompt_is_named_with_its_cost_and_what_to_check():
    before = vllm_decode(local=0, cached=0, external=0, requests=0)
    after = vllm_decode(local=4 * 1003, cached=0, external=0, requests=4)
    found = problems([window(before, after, "decode-0", "decode", 16)], None, 2.0)
    assert [p["key"] for p in found] == ["decode_recompute"]
    reason = problem_reason(found[0])
    assert reason.startswith("silent prefill recompute: decode recomputed 100 % of 4,012 prompt tokens")
    assert "~2.0× prefill work and TTFT" in reason
    assert "kv_transfer_config" in reason and "decode-0" in reason


def test_short_prompts_that_move_no_whole_block_are_not_a_recompute():
    # prompts shorter than one block never travel: computed on decode by design
    before = vllm_decode(local=0, cached=0, external=0, requests=0, block=128)
    after = vllm_decode(local=20 * 100, cached=0, external=0, requests=20, block=128)
    assert problems([window(before, after, "decode-0", "decode", 128)], None, 2.0) == []


def test_a_prefill_computing_its_prompts_is_not_a_recompute():
    before = vllm_decode(local=0, cached=0, external=0, requests=0)
    after = vllm_decode(local=8000, cached=0, external=0, requests=4)
    assert problems([window(before, after, "prefill-0", "prefill", 16)], None, 2.0) == []


def test_kv_expiry_on_the_prefill_is_named_and_clears_when_the_counter_stops():
    first, second = vllm_prefill(), vllm_prefill(expired=3, after_expiry=1)
    third = vllm_prefill(expired=3, after_expiry=1)
    found = problems([window(first, second, "prefill-0", "prefill")], None, 2.0)
    assert [p["key"] for p in found] == ["kv_expired"]
    assert "3 request(s)' KV expired on prefill-0" in found[0]["detail"]
    assert "1 pull(s) came after expiry" in found[0]["detail"]
    assert "VLLM_NIXL_ABORT_REQUEST_TIMEOUT" in found[0]["check"]
    assert problems([window(second, third, "prefill-0", "prefill")], None, 2.0) == []


def test_transfer_failures_are_silent_only_when_no_request_failed():
    pod = window(vllm_prefill(), vllm_prefill(failed=2), "decode-1", "decode")
    ok = TopologyOutcomes(ok=10, failed=0, client=0, roles={})
    failing = TopologyOutcomes(ok=8, failed=2, client=0, roles={})
    assert [p["key"] for p in problems([pod], ok, 2.0)] == ["silent_transfer_failures"]
    assert problems([pod], failing, 2.0) == []


def test_rdma_to_tcp_failover_in_tent_counters_is_a_transport_fallback():
    before = tent(rdma=1_000_000, tcp=0, failovers=0)
    after = tent(rdma=1_000_000, tcp=3_000_000, failovers=2)
    found = problems([window(before, after, "decode-0", "decode")], None, 2.0)
    assert [p["key"] for p in found] == ["transport_fallback"]
    assert "rdma → tcp ×2" in found[0]["detail"]
    assert "100 % of KV bytes over TCP" in found[0]["detail"]
    steady = tent(rdma=2_000_000, tcp=3_000_000, failovers=2)
    assert problems([window(after, steady, "decode-0", "decode")], None, 2.0) == []


def test_a_problem_makes_a_healthy_topology_degraded_and_leads_its_reasons():
    before = vllm_decode(local=0, cached=0, external=0, requests=0)
    after = vllm_decode(local=4000, cached=0, external=100, requests=4)
    found = problems([window(before, after, "decode-0", "decode", 16)], None, 2.0)
    pod = PodSample(
        **empty_metrics(),
        name="decode-0",
        role="decode",
        ip="",
        ready=True,
        phase="Running",
        engine="vllm",
        stale=False,
        error=None,
        restarted=False,
    )
    slo = Slo(ttft_ms=None, tbt_ms=None, ttft_p95_ms=None, tbt_p95_ms=None, state="unknown")
    health = topology_health(pods=[pod], links=[], slo=slo, pod_reasons=[], extra=[], problems=found)
    assert health["state"] == "degraded"
    assert health["reasons"][0].startswith("silent prefill recompute: decode recomputed 98 %")
    assert health.get("problems", [])[0]["key"] == "decode_recompute"
    clean = topology_health(pods=[pod], links=[], slo=slo, pod_reasons=[], extra=[], problems=[])
    assert clean == {"state": "healthy", "reasons": []}
