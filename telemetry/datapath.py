"""Silent P/D data-path failures, read from the engines' own counters (PURE).

A P/D topology can look healthy while its KV cache does not travel: every request succeeds, yet the
decode pods prefill the prompts again themselves (twice the prefill work and about twice the TTFT),
the prefill's KV expires before the decode pulls it, transfers fail and are silently recomputed, or
the transfer engine falls back from RDMA to TCP. Each is a named ``Problem`` judged on one collection
interval's counter increments, so it turns on in the first interval that shows it and off in the
first interval that does not.

Counters (canonical fields of ``telemetry.parse``; the real names are cited there and in
docs/silent-failures.md):

- ``prompt_local_compute`` / ``prompt_local_cache_hit`` / ``prompt_external_kv``:
  ``vllm:prompt_tokens_by_source_total{source}`` (vLLM ``vllm/v1/metrics/loggers.py``).
- ``xfer_expired``: ``vllm:nixl_num_kv_expired_reqs_total`` (prefill side);
  ``xfer_notified_after_expiry``: ``vllm:nixl_num_notifications_after_expiry_total``.
- ``xfer_failed`` (+ notifications, receives, SGLang bootstrap failures): the connectors' failure counters.
- ``tent_failover_<from>_to_<to>`` / ``tent_bytes_<transport>``: Mooncake TENT's
  ``tent_transport_failover_total{from,to}`` and ``tent_{read,write}_bytes_total{transport}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from telemetry.derive import TopologyOutcomes, Window

ProblemKey = Literal["decode_recompute", "kv_expired", "silent_transfer_failures", "transport_fallback"]

# A decode pod computing more than this share of its prompt tokens itself did not get the KV.
RECOMPUTE_SHARE = 0.5
# Fewer excess tokens than this in an interval say too little (one short request's tail).
RECOMPUTE_MIN_TOKENS = 256
# vLLM's default KV block size on GPUs; a decode legitimately computes up to one block per request
# (only whole blocks travel). The engine's own ``vllm:cache_config_info{block_size}`` wins when known.
DEFAULT_BLOCK_SIZE = 16
FAILURE_FIELDS = ("xfer_failed", "xfer_failed_recvs", "bootstrap_failed")
SLOW_TRANSPORTS = ("tcp",)


class Problem(TypedDict):
    key: ProblemKey
    name: str  # a short name an operator can search for: "silent prefill recompute"
    detail: str  # what the counters say, with the figures
    cost: str  # what it costs
    check: str  # what to look at first
    pods: list[str]  # the pods it was seen on


@dataclass(frozen=True)
class PodWindow:
    name: str
    role: str
    window: Window
    block_size: int | None = None


def problem_reason(problem: Problem) -> str:
    """The health reason: ``"silent prefill recompute: ... Costs ...; check ..."``."""
    return f"{problem['name']}: {problem['detail']}. Costs {problem['cost']}. Check {problem['check']}."


def _requests_prefilled(window: Window) -> float:
    """Requests that reached their first token in the window (the TTFT histogram's count increment)."""
    ttft = window.hists.get("ttft")
    return ttft[-1][1] if ttft else 0.0


def _pct(value: float) -> str:
    return f"{value * 100:.0f} %"


def decode_recompute(pods: list[PodWindow], interval_s: float) -> Problem | None:
    """Decode pods that prefilled the prompt themselves instead of receiving its KV."""
    local = cached = received = excess = 0.0
    seen: list[str] = []
    for pod in pods:
        d = pod.window.deltas
        if pod.role != "decode" or "prompt_local_compute" not in d:
            continue
        pod_local = d.get("prompt_local_compute", 0.0)
        pod_total = pod_local + d.get("prompt_local_cache_hit", 0.0) + d.get("prompt_external_kv", 0.0)
        allowance = _requests_prefilled(pod.window) * (pod.block_size or DEFAULT_BLOCK_SIZE)
        pod_excess = max(0.0, pod_local - allowance)
        local += pod_local
        cached += d.get("prompt_local_cache_hit", 0.0)
        received += d.get("prompt_external_kv", 0.0)
        excess += pod_excess
        if pod_total > 0 and pod_excess >= RECOMPUTE_MIN_TOKENS and pod_excess / pod_total > RECOMPUTE_SHARE:
            seen.append(pod.name)
    total = local + cached + received
    if not seen or total <= 0:
        return None
    share = local / total
    factor = 1 + min(1.0, excess / total)
    return Problem(
        key="decode_recompute",
        name="silent prefill recompute",
        detail=(
            f"decode recomputed {_pct(share)} of {total:,.0f} prompt tokens ({_pct(received / total)} "
            f"received via the KV connector) on {', '.join(seen)} in {interval_s:g} s; requests still succeed"
        ),
        cost=f"~{factor:.1f}× prefill work and TTFT",
        check="the decode's kv_transfer_config, that the router passes kv_transfer_params, the link",
        pods=seen,
    )


def kv_expired(pods: list[PodWindow], interval_s: float) -> Problem | None:
    """Prefill pods whose KV expired before a decode pulled it (counted on the prefill side)."""
    expired = late = 0.0
    seen: list[str] = []
    for pod in pods:
        d = pod.window.deltas
        n = d.get("xfer_expired", 0.0)
        expired += n
        late += d.get("xfer_notified_after_expiry", 0.0)
        if n > 0 or d.get("xfer_notified_after_expiry", 0.0) > 0:
            seen.append(pod.name)
    if not seen:
        return None
    after = f"; {late:.0f} pull(s) came after expiry" if late else ""
    return Problem(
        key="kv_expired",
        name="KV expired before decode pulled it",
        detail=f"{expired:.0f} request(s)' KV expired on {', '.join(seen)} in {interval_s:g} s{after}",
        cost="those prompts are prefilled again on decode (~2× their prefill work and TTFT)",
        check="that decode pulls in time (link, decode queue) and VLLM_NIXL_ABORT_REQUEST_TIMEOUT",
        pods=seen,
    )


def silent_transfer_failures(
    pods: list[PodWindow], requests: TopologyOutcomes | None, interval_s: float
) -> Problem | None:
    """KV transfers that failed while no request failed: the engines recomputed instead."""
    failed_requests = requests.failed if requests is not None else 0.0
    if failed_requests > 0:
        return None  # the request errors are said already, with the transfer failures behind them
    failed = 0.0
    seen: list[str] = []
    for pod in pods:
        n = sum(pod.window.deltas.get(field, 0.0) for field in FAILURE_FIELDS)
        if n > 0:
            failed += n
            seen.append(pod.name)
    if not seen:
        return None
    return Problem(
        key="silent_transfer_failures",
        name="KV transfers failing silently",
        detail=f"{failed:.0f} KV transfer(s) failed on {', '.join(seen)} in {interval_s:g} s; no request did",
        cost="each such prompt is prefilled again on decode (~2× its prefill work and TTFT)",
        check="the KV link (network, RDMA devices) and the connector's log lines",
        pods=seen,
    )


def transport_fallback(pods: list[PodWindow], interval_s: float) -> Problem | None:
    """Transfers that fell back to a slower transport (Mooncake TENT: ``from`` → ``to``)."""
    moves: dict[str, float] = {}
    slow_bytes = fast_bytes = 0.0
    seen: list[str] = []
    for pod in pods:
        mark = False
        for name, value in pod.window.deltas.items():
            if name.startswith("tent_failover_") and value > 0:
                pair = name.removeprefix("tent_failover_").replace("_to_", " → ")
                moves[pair] = moves.get(pair, 0.0) + value
                mark = True
            elif name.startswith("tent_bytes_"):
                transport = name.removeprefix("tent_bytes_")
                if transport in SLOW_TRANSPORTS:
                    slow_bytes += value
                else:
                    fast_bytes += value
        if mark:
            seen.append(pod.name)
    if not seen:
        return None
    moved = ", ".join(f"{pair} ×{n:.0f}" for pair, n in sorted(moves.items()))
    total = slow_bytes + fast_bytes
    share = f"; {_pct(slow_bytes / total)} of KV bytes over TCP" if total > 0 else ""
    return Problem(
        key="transport_fallback",
        name="KV transport fell back",
        detail=f"{moved} on {', '.join(seen)} in {interval_s:g} s{share}",
        cost="transfers succeed but several times slower: TTFT grows with prompt length",
        check="the RDMA devices on both nodes (ibv_devinfo), the transfer engine's protocol setting",
        pods=seen,
    )


def problems(pods: list[PodWindow], requests: TopologyOutcomes | None, interval_s: float) -> list[Problem]:
    """Every data-path problem one interval shows, most costly first."""
    found = [
        decode_recompute(pods, interval_s),
        kv_expired(pods, interval_s),
        silent_transfer_failures(pods, requests, interval_s),
        transport_fallback(pods, interval_s),
    ]
    return [p for p in found if p is not None]
