"""The router's own `/metrics`, with kthena-router's family names.

`kthena_router_requests_total{model,path,status_code,error_type}` (error_type "" on success, else
one of no_endpoints, prefill_error, decode_error, timeout, bad_request, model_not_found),
`kthena_router_request_duration_seconds{model,path,status_code}`,
`kthena_router_request_prefill_duration_seconds{model}`,
`kthena_router_request_decode_duration_seconds{model}`
(histograms), `kthena_router_active_downstream_requests{model}` (gauge),
`kthena_router_retries_total{model,reason}` and `kthena_router_prefix_affinity_total{model,result}`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sandbox.engine.exposition import Histogram, Writer

DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip


@dataclass
class RouterStats:
    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (path, status, error)
    durations: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    prefill: Histogram = field(default_factory=lambda: Histogram(DURATION_BUCKETS))
    decode: Histogram = field(default_factory=lambda: Histogram(DURATION_BUCKETS))
    retries: Counter[str] = field(default_factory=Counter)
    affinity: Counter[str] = field(default_factory=lambda: Counter({"hit": 0, "miss": 0}))
    active: int = 0

    def finished(self, path: str, status: int, error: str, seconds: float) -> None:
        self.requests[(path, str(status), error)] += 1
        key = (path, str(status))
        if key not in self.durations:
            self.durations[key] = Histogram(DURATION_BUCKETS)
        self.durations[key].observe(seconds)

    def render(self, model: str) -> str:
        w = Writer()
        base = {"model": model}
        w.counter(
            "kthena_router_requests",
            "Total number of requests handled by the router.",
            [
                ({**base, "path": p, "status_code": s, "error_type": e}, n)
                for (p, s, e), n in sorted(self.requests.items())
            ],
        )
        w.histogram(
            "kthena_router_request_duration_seconds",
            "End-to-end request duration through the router.",
            [({**base, "path": p, "status_code": s}, h) for (p, s), h in sorted(self.durations.items())],
        )
        w.histogram(
            "kthena_router_request_prefill_duration_seconds",
            "Prefill phase duration.",
            [(base, self.prefill)],
        )
        w.histogram(
            "kthena_router_request_decode_duration_seconds", "Decode phase duration.", [(base, self.decode)]
        )
        w.gauge("kthena_router_active_downstream_requests", "Active client requests.", [(base, self.active)])
        w.counter(
            "kthena_router_retries",
            "Upstream attempts retried, by reason.",
            [({**base, "reason": r}, n) for r, n in sorted(self.retries.items())],
        )
        w.counter(
            "kthena_router_prefix_affinity",
            "Prefill choices by prefix affinity (hit) or load (miss).",
            [({**base, "result": r}, n) for r, n in sorted(self.affinity.items())],
        )
        return w.text()
