"""The router's own `/metrics` and log, with kthena-router's names (pkg/kthena-router/metrics/metrics.go,
router/router.go).

Metrics: `kthena_router_requests_total{model,path,status_code,error_type,model_route,backend_type,
backend_name,upstream_model}` (error_type "" on success; the sandbox's values are no_endpoints,
prefill_error, decode_error, timeout, bad_request, model_not_found),
`kthena_router_request_duration_seconds{model,path,status_code,model_route,backend_type,backend_name,
upstream_model}`, `kthena_router_request_prefill_duration_seconds{model,path,status_code}`,
`kthena_router_request_decode_duration_seconds{model,path,status_code}` (histograms, Kthena's buckets),
`kthena_router_active_downstream_requests{model}` (gauge) and
`kthena_router_prefix_cache_match_ratio{model}` (histogram: per prefix-aware scheduling attempt, the share
of the prompt's blocks the best-matching candidate pod held, 0 on a miss: `sandbox.router.matching`).

Log (klog format, as the router writes it): per failed prefill/decode attempt
`E<mmdd hh:mm:ss.uuuuuu> 1 router.go:812] proxy failed for prefill pod <p>, decode pod <d>: <err>`; at
verbosity 4, `Attempting PD disaggregated request: prefill=<ip:port>, decode=<ip:port>` and
`kv connector run successful for prefill pod <p>, decode pod <d>, output tokens: <n>`.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field

from sandbox.engine.exposition import Histogram, Writer

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
MATCH_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
LOG_LINES = 2000


def klog(level: str, source: str, message: str, now: float | None = None) -> str:
    """One klog line: ``I1201 09:20:00.123456       1 router.go:812] message``."""
    now = time.time() if now is None else now
    stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(now))
    return f"{level[0]}{stamp}.{int(now % 1 * 1e6):06d}       1 {source}] {message}"


@dataclass
class RouterStats:
    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (path, status, error)
    durations: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    prefill: dict[tuple[str, str], Histogram] = field(default_factory=dict)  # (path, status)
    decode: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    match_ratio: Histogram = field(default_factory=lambda: Histogram(MATCH_BUCKETS))
    active: int = 0
    log_lines: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES))

    def finished(self, path: str, status: int, error: str, seconds: float) -> None:
        self.requests[(path, str(status), error)] += 1
        _observe(self.durations, (path, str(status)), seconds)

    def phase(self, which: str, path: str, status: int, seconds: float) -> None:
        _observe(self.prefill if which == "prefill" else self.decode, (path, str(status)), seconds)

    def log(self, level: str, source: str, message: str) -> None:
        self.log_lines.append(klog(level, source, message))

    def render(self, model: str, route: str, server: str) -> str:
        w = Writer()
        base = {"model": model}
        where = {"model_route": route, "backend_type": "model_server", "backend_name": server}
        w.counter(
            "kthena_router_requests",
            "Total number of HTTP requests processed by the router",
            [
                ({**base, "path": p, "status_code": s, "error_type": e, **where, "upstream_model": model}, n)
                for (p, s, e), n in sorted(self.requests.items())
            ],
        )
        w.histogram(
            "kthena_router_request_duration_seconds",
            "End-to-end request processing latency distribution for all requests",
            [
                ({**base, "path": p, "status_code": s, **where, "upstream_model": model}, h)
                for (p, s), h in sorted(self.durations.items())
            ],
        )
        w.histogram(
            "kthena_router_request_prefill_duration_seconds",
            "Prefill phase processing latency distribution for PD-disaggregated requests",
            [({**base, "path": p, "status_code": s}, h) for (p, s), h in sorted(self.prefill.items())],
        )
        w.histogram(
            "kthena_router_request_decode_duration_seconds",
            "Decode phase processing latency distribution for PD-disaggregated requests",
            [({**base, "path": p, "status_code": s}, h) for (p, s), h in sorted(self.decode.items())],
        )
        w.gauge(
            "kthena_router_active_downstream_requests",
            "Current number of active downstream requests (from clients to router)",
            [(base, self.active)],
        )
        w.histogram(
            "kthena_router_prefix_cache_match_ratio",
            "Fraction of the prompt's blocks the best-matching candidate pod had already cached, "
            "per prefix-cache match attempt (0 = miss)",
            [(base, self.match_ratio)],
        )
        return w.text()


def _observe(table: dict[tuple[str, str], Histogram], key: tuple[str, str], seconds: float) -> None:
    if key not in table:
        table[key] = Histogram(DURATION_BUCKETS)
    table[key].observe(seconds)
