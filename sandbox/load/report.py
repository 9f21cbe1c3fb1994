"""What a load run measured: TTFT / ITL / end-to-end quantiles and SLO attainment."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from perfmodel.model.stats import quantile


@dataclass(frozen=True)
class Quantiles:
    p50: float
    p95: float
    p99: float
    mean: float
    max: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Quantiles:
        return cls(
            p50=quantile(values, 0.5),
            p95=quantile(values, 0.95),
            p99=quantile(values, 0.99),
            mean=sum(values) / len(values) if values else 0.0,
            max=max(values) if values else 0.0,
            count=len(values),
        )


@dataclass
class RequestResult:
    kind: str
    shared: bool
    ok: bool
    error: str | None = None
    ttft: float | None = None  # seconds from the scheduled send time
    itls: list[float] = field(default_factory=list)
    e2e: float | None = None
    output_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    late: float = 0.0  # how late the generator sent it (its own lag)

    @property
    def tbt(self) -> float | None:
        return sum(self.itls) / len(self.itls) if self.itls else None


@dataclass
class SloResult:
    ttft_ms: float
    tbt_ms: float
    ttft_attainment: float
    tbt_attainment: float
    attainment: float


@dataclass
class LoadReport:
    url: str
    model: str
    pattern: str
    target_rate: float
    duration_s: float
    wall_s: float
    sent: int
    succeeded: int
    failed: int
    errors: dict[str, int]
    achieved_rps: float
    ttft_ms: Quantiles
    itl_ms: Quantiles
    e2e_ms: Quantiles
    output_tokens: int
    output_tokens_per_s: float
    shared_prefix_requests: int
    cached_prompt_tokens: int
    slo: SloResult
    by_kind: dict[str, dict[str, Quantiles]]
    max_send_lag_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def table(self) -> str:
        rows = [
            f"{self.pattern} load on {self.url} model {self.model}: {self.sent} requests "
            f"in {self.wall_s:.1f}s "
            f"(target {self.target_rate:g}/s, achieved {self.achieved_rps:.2f}/s), "
            f"{self.succeeded} ok, {self.failed} failed {dict(self.errors) if self.errors else ''}".rstrip(),
            f"{'metric':<10}{'p50':>10}{'p95':>10}{'p99':>10}{'mean':>10}{'max':>10}",
        ]
        for name, q in (("TTFT ms", self.ttft_ms), ("TBT ms", self.itl_ms), ("E2E ms", self.e2e_ms)):
            rows.append(f"{name:<10}{q.p50:>10.1f}{q.p95:>10.1f}{q.p99:>10.1f}{q.mean:>10.1f}{q.max:>10.1f}")
        for kind, metrics in sorted(self.by_kind.items()):
            ttft, itl = metrics["ttft_ms"], metrics["itl_ms"]
            rows.append(
                f"  {kind}: {ttft.count} requests, TTFT p95 {ttft.p95:.1f} ms, TBT p95 {itl.p95:.1f} ms"
            )
        rows.append(
            f"output {self.output_tokens} tokens ({self.output_tokens_per_s:.1f}/s); shared-prefix requests "
            f"{self.shared_prefix_requests}; cached prompt tokens {self.cached_prompt_tokens}"
        )
        s = self.slo
        rows.append(
            f"SLO TTFT<={s.ttft_ms:g}ms: {s.ttft_attainment:.1%}  "
            f"TBT<={s.tbt_ms:g}ms: {s.tbt_attainment:.1%}  "
            f"both: {s.attainment:.1%}"
        )
        return "\n".join(rows)


def build_report(
    *,
    url: str,
    model: str,
    pattern: str,
    target_rate: float,
    duration_s: float,
    wall_s: float,
    results: Sequence[RequestResult],
    ttft_slo_ms: float,
    tbt_slo_ms: float,
) -> LoadReport:
    ok = [r for r in results if r.ok]
    errors = Counter(r.error or "unknown" for r in results if not r.ok)
    ttft_ok = [r for r in ok if r.ttft is not None and r.ttft * 1000 <= ttft_slo_ms]
    tbt_ok = [r for r in ok if r.tbt is None or r.tbt * 1000 <= tbt_slo_ms]
    both = [r for r in ttft_ok if r.tbt is None or r.tbt * 1000 <= tbt_slo_ms]
    total = len(results) or 1
    by_kind: dict[str, dict[str, Quantiles]] = {}
    for kind in sorted({r.kind for r in ok}):
        subset = [r for r in ok if r.kind == kind]
        by_kind[kind] = {
            "ttft_ms": Quantiles.of([r.ttft * 1000 for r in subset if r.ttft is not None]),
            "itl_ms": Quantiles.of([i * 1000 for r in subset for i in r.itls]),
        }
    output_tokens = sum(r.output_tokens for r in ok)
    return LoadReport(
        url=url,
        model=model,
        pattern=pattern,
        target_rate=target_rate,
        duration_s=duration_s,
        wall_s=wall_s,
        sent=len(results),
        succeeded=len(ok),
        failed=len(results) - len(ok),
        errors=dict(errors),
        achieved_rps=len(ok) / wall_s if wall_s > 0 else 0.0,
        ttft_ms=Quantiles.of([r.ttft * 1000 for r in ok if r.ttft is not None]),
        itl_ms=Quantiles.of([i * 1000 for r in ok for i in r.itls]),
        e2e_ms=Quantiles.of([r.e2e * 1000 for r in ok if r.e2e is not None]),
        output_tokens=output_tokens,
        output_tokens_per_s=output_tokens / wall_s if wall_s > 0 else 0.0,
        shared_prefix_requests=sum(1 for r in results if r.shared),
        cached_prompt_tokens=sum(r.cached_tokens for r in ok),
        slo=SloResult(
            ttft_ms=ttft_slo_ms,
            tbt_ms=tbt_slo_ms,
            ttft_attainment=len(ttft_ok) / total,
            tbt_attainment=len(tbt_ok) / total,
            attainment=len(both) / total,
        ),
        by_kind=by_kind,
        max_send_lag_ms=max((r.late for r in results), default=0.0) * 1000,
    )
