"""Which traces are kept, decided when the gateway's request ends: pure functions.

Head: a fixed fraction of normal requests, decided from the trace id alone (its lower 64 bits as a
fraction, as OpenTelemetry's TraceIdRatioBased sampler does), so the receiver can tell a head-kept
trace without asking anyone. Tail: every failed request, and every slow one, over the topology's SLO
time to first token or its total latency (the TTFT target plus the TBT target for each further token).
"""

from __future__ import annotations

_SPAN = float(1 << 64)


def head_kept(trace_id: str, rate: float) -> bool:
    if rate <= 0:
        return False
    if rate >= 1:
        return True
    return int(trace_id[16:], 16) / _SPAN < rate


def total_budget_ms(
    *, slo_ttft_ms: int | None, slo_tbt_ms: int | None, completion_tokens: int
) -> float | None:
    """The SLO's total latency for an answer of this many tokens, or None without a TTFT target."""
    if slo_ttft_ms is None:
        return None
    return float(slo_ttft_ms) + float(slo_tbt_ms or 0) * max(0, completion_tokens - 1)


def decide(
    *,
    trace_id: str,
    status: int,
    backend: str,
    latency_ms: float,
    ttft_ms: float | None,
    completion_tokens: int,
    slo_ttft_ms: int | None,
    slo_tbt_ms: int | None,
    head_rate: float,
) -> tuple[str, str]:
    """(kept, why): kept is "failed", "slow", "head" or "" (not kept)."""
    if status >= 500 or status == 0:
        return "failed", f"answered {status}" if status else "no answer"
    if backend == "fallback":
        return "failed", "the cluster failed and the fallback answered"
    if status < 400:
        if ttft_ms is not None and slo_ttft_ms is not None and ttft_ms > slo_ttft_ms:
            return "slow", f"TTFT {ttft_ms:,.0f} ms over the SLO's {slo_ttft_ms:,} ms"
        budget = total_budget_ms(
            slo_ttft_ms=slo_ttft_ms, slo_tbt_ms=slo_tbt_ms, completion_tokens=completion_tokens
        )
        if budget is not None and latency_ms > budget:
            return "slow", f"latency {latency_ms:,.0f} ms over the SLO's {budget:,.0f} ms"
    if head_kept(trace_id, head_rate):
        return "head", "head-sampled"
    return "", ""


class TailBudget:
    """How many slow or failed traces one topology may keep per second in one gateway process: a token
    bucket of ``per_second`` tokens a second holding at most ``per_second`` (a burst of that many kept
    at once). In an outage every request fails the same way; the first ones say what happened, and
    keeping each of a hundred a second would only load the database and the writers' memory. The
    gateway's request records still count every one. ``per_second`` 0: no limit."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.tokens = per_second
        self.at: float | None = None

    def take(self, now: float) -> bool:
        if self.per_second <= 0:
            return True
        if self.at is not None:
            self.tokens = min(self.per_second, self.tokens + (now - self.at) * self.per_second)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
