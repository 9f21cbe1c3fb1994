"""Derived metrics from two raw samples of a pod, and their roll-up per role and topology (PURE).

A pod's *window* is what happened between its previous and current raw sample: counter increments
(and the same per second), histogram bucket increments, and current gauge values. Windows of several
pods merge by adding increments, so role and topology quantiles come from the merged bucket
increments (the right way to aggregate quantiles), never from averaging pod quantiles.

Counter resets: when any counter or histogram count of a pod went down, the engine restarted; the
whole window then uses the current values as the increments (the counts since the restart), so a
restart never yields a negative rate, and the previous pre-restart totals never turn into a spike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from telemetry.parse import Histogram, RawSample
from telemetry.snapshot import Metrics, empty_metrics

Buckets = list[tuple[float, float]]

# Which role's pods a topology-level value comes from, when that role has data for it. In P/D a
# request passes both roles: the prompt (and its prefix-cache lookups) is processed on prefill,
# tokens are generated and the client-visible latencies are recorded on decode. Everything else
# adds up over all pods.
PREFILL_FIRST = ("hit_rate", "external_hit_rate", "prompt_tps")
DECODE_FIRST = (
    "ttft_p50",
    "ttft_p95",
    "ttft_p99",
    "tbt_p50",
    "tbt_p95",
    "tbt_p99",
    "gen_tps",
    "requests_ps",
)


# Histograms whose sum (and count) per interval are kept beside their buckets: bytes moved and seconds spent
# per transfer; TTFT and TBT for their exact means (the calibration fits on them).
SUMMED_HISTOGRAMS = frozenset({"xfer_bytes", "xfer_time", "ttft", "itl"})


@dataclass
class Window:
    """Increments of one interval for one pod, or for several pods merged."""

    rates: dict[str, float] = field(default_factory=dict)  # counter increments per second
    deltas: dict[str, float] = field(default_factory=dict)  # counter increments
    hists: dict[str, Buckets] = field(default_factory=dict)  # cumulative bucket increments
    gauges: dict[str, list[float]] = field(default_factory=dict)  # one value per pod
    seconds: float = 0.0  # the interval covered (mean over merged pods)
    pods: int = 0
    has_deltas: bool = False
    present: set[str] = field(default_factory=set)  # the canonical fields the pods export at all


def is_reset(current: RawSample, previous: RawSample) -> bool:
    """True when any counter or histogram count went down: the engine restarted."""
    for name, value in current["counters"].items():
        if value < previous["counters"].get(name, 0.0):
            return True
    for name, hist in current["histograms"].items():
        before = previous["histograms"].get(name)
        if before is not None and hist["count"] < before["count"]:
            return True
    return False


def histogram_delta(current: Histogram, previous: Histogram | None) -> Buckets:
    """Cumulative bucket increments; the current buckets when there is no comparable previous one."""
    if previous is None:
        return [(le, max(0.0, count)) for le, count in current["buckets"]]
    now, then = current["buckets"], previous["buckets"]
    if len(now) != len(then):
        return [(le, max(0.0, count)) for le, count in now]
    out: Buckets = []
    floor = 0.0
    for (le, count), (bound, earlier) in zip(now, then, strict=True):
        if le != bound:  # the bucket layout changed: no comparable previous sample
            return [(le, max(0.0, count)) for le, count in now]
        delta = count - earlier
        if delta > floor:
            floor = delta
        out.append((le, floor))
    return out


def quantile(buckets: Buckets, q: float) -> float | None:
    """The q-quantile of observations given cumulative bucket counts, interpolated inside a bucket.

    Follows Prometheus' ``histogram_quantile``: the first bucket's lower bound is 0, a rank in the
    +Inf bucket returns the highest finite upper bound, and no observations give ``None``.
    """
    if not buckets:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank and count > below:
            if math.isinf(le):
                return lower
            if le <= 0:
                return le
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = (le if not math.isinf(le) else lower), count
    return lower


def _at(buckets: Buckets, le: float) -> float:
    """Cumulative count at bound ``le`` of a histogram that may not have that bound."""
    value = 0.0
    for bound, count in buckets:
        if bound > le:
            break
        value = count
    return value


def merge_buckets(a: Buckets, b: Buckets) -> Buckets:
    if [le for le, _ in a] == [le for le, _ in b]:
        return [(le, ca + cb) for (le, ca), (_, cb) in zip(a, b, strict=True)]
    bounds = sorted({le for le, _ in a} | {le for le, _ in b})
    return [(le, _at(a, le) + _at(b, le)) for le in bounds]


def pod_window(current: RawSample, previous: RawSample | None) -> tuple[Window, bool]:
    """The pod's window and whether it restarted. Without a previous sample only gauges are known."""
    window = Window(gauges={k: [v] for k, v in current["gauges"].items()}, pods=1)
    window.present = {*current["counters"], *current["gauges"], *current["histograms"]}
    if previous is None:
        return window, False
    seconds = current["ts"] - previous["ts"]
    if seconds <= 0:
        return window, False
    restarted = is_reset(current, previous)
    window.seconds = seconds
    window.has_deltas = True
    for name, value in current["counters"].items():
        # A series that appears between two samples of the same process started at zero (labelled
        # counters such as http_requests_total{status="5xx"} appear with their first event).
        delta = value if restarted else max(0.0, value - previous["counters"].get(name, 0.0))
        window.deltas[name] = delta
        window.rates[name] = delta / seconds
    for name, hist in current["histograms"].items():
        before = None if restarted else previous["histograms"].get(name)
        if before is None and not restarted:
            continue  # a family that just appeared: its first window starts now
        if before is not None and hist["count"] == before["count"]:
            continue  # nothing observed in this interval: no data, like a family that is absent
        window.hists[name] = histogram_delta(hist, before)
        if name in SUMMED_HISTOGRAMS:  # bytes moved (and seconds spent) per interval, not only counts
            window.deltas[f"{name}_sum"] = max(0.0, hist["sum"] - (before["sum"] if before else 0.0))
            window.deltas[f"{name}_count"] = max(0.0, hist["count"] - (before["count"] if before else 0.0))
    return window, restarted


def merge(windows: Iterable[Window]) -> Window:
    out = Window()
    seconds = []
    for window in windows:
        out.pods += window.pods
        out.present |= window.present
        for name, values in window.gauges.items():
            out.gauges.setdefault(name, []).extend(values)
        if not window.has_deltas:
            continue
        out.has_deltas = True
        seconds.append(window.seconds)
        for name, value in window.deltas.items():
            out.deltas[name] = out.deltas.get(name, 0.0) + value
        for name, value in window.rates.items():
            out.rates[name] = out.rates.get(name, 0.0) + value
        for name, buckets in window.hists.items():
            out.hists[name] = merge_buckets(out.hists[name], buckets) if name in out.hists else buckets
    out.seconds = sum(seconds) / len(seconds) if seconds else 0.0
    return out


def _ratio(hits: float | None, queries: float | None) -> float | None:
    if hits is None or queries is None or queries <= 0:
        return None
    return min(1.0, max(0.0, hits / queries))


def _per(total: float | None, count: float | None) -> float | None:
    return total / count if total is not None and count else None


def _mean(values: list[float] | None) -> float | None:
    return sum(values) / len(values) if values else None


def _sum(values: list[float] | None) -> float | None:
    return float(sum(values)) if values else None


def metrics(window: Window) -> Metrics:
    """Derived values of a window (a pod, a role or a topology)."""
    out = empty_metrics()
    d, r, g = window.deltas, window.rates, window.gauges
    out["hit_rate"] = _ratio(d.get("prefix_hits"), d.get("prefix_queries"))
    if out["hit_rate"] is None and "prefix_queries" not in d:
        out["hit_rate"] = _mean(g.get("hit_rate"))
    out["external_hit_rate"] = _ratio(d.get("ext_hits"), d.get("ext_queries"))
    ttft, itl = window.hists.get("ttft"), window.hists.get("itl")
    if ttft:
        out["ttft_p50"], out["ttft_p95"], out["ttft_p99"] = (quantile(ttft, q) for q in (0.5, 0.95, 0.99))
    if itl:
        out["tbt_p50"], out["tbt_p95"], out["tbt_p99"] = (quantile(itl, q) for q in (0.5, 0.95, 0.99))
    out["ttft_mean"] = _per(d.get("ttft_sum"), d.get("ttft_count"))
    out["tbt_mean"] = _per(d.get("itl_sum"), d.get("itl_count"))
    if window.has_deltas:
        out["prompt_tps"] = r.get("prompt_tokens")
        out["gen_tps"] = r.get("gen_tokens")
    if out["gen_tps"] is None:
        out["gen_tps"] = _sum(g.get("gen_throughput"))
    out["running"] = _sum(g.get("running"))
    out["waiting"] = _sum(g.get("waiting"))
    out["kv_usage"] = _mean(g.get("kv_usage"))
    if out["kv_usage"] is None and g.get("store_capacity_bytes") and g.get("store_allocated_bytes"):
        capacity = sum(g["store_capacity_bytes"])
        out["kv_usage"] = sum(g["store_allocated_bytes"]) / capacity if capacity > 0 else None
    result = outcomes(window)
    if result is not None:
        out["requests_ps"] = result.answered / window.seconds if window.seconds > 0 else None
    if result is not None and result.answered > 0:
        out["success_rate"] = result.ok / result.answered
        out["error_rate"] = result.failed / result.answered
        out["client_error_rate"] = result.client / result.answered
    for name, value in out.items():
        if isinstance(value, float):
            out[name] = significant(value)  # type: ignore[literal-required]
    return out


# Status classes the engine failed (429: it was overloaded), and those it refused as the client's (a
# prompt over the context, a bad parameter, an unknown model); ``4xx_class``: real vLLM counts statuses
# by class only, so a 429 cannot be told from the client's 4xx there.
HTTP_FAILURES = ("429", "5xx", "other")
HTTP_CLIENT = ("4xx", "4xx_class")


@dataclass(frozen=True)
class Outcomes:
    """The requests a window's pods answered: served, failed by the engine, refused as the client's."""

    ok: float
    failed: float
    client: float = 0.0
    classes: dict[str, float] = field(default_factory=dict)  # count per non-2xx class (failed and client)

    @property
    def answered(self) -> float:
        return self.ok + self.failed + self.client

    @property
    def grouped(self) -> bool:
        """The engine groups 4xx answers by class: a 429 would be among them, unseen."""
        return self.classes.get("4xx_class", 0.0) > 0


def outcomes(window: Window) -> Outcomes | None:
    """The outcomes of the requests a window's pods answered, or None when its pods count no outcomes
    (or there is no interval yet).

    Counted where the answers are seen: the router's ``kthena_router_requests_total{status_code}`` first,
    then the API server's ``http_requests_total{status}`` (every answer, including a 503 or 429 the
    engine core never saw), then the engines' own counters (vLLM ``request_success_total`` with
    ``finished_reason="abort"`` or ``"error"`` as failures; MindIE ``request_success_total`` /
    ``request_failed_total``; SGLang's finished-request histogram count, which has no failures)."""
    if not window.has_deltas:
        return None
    d = window.deltas
    for prefix in ("router", "http"):
        keys = [f"{prefix}_{cls}" for cls in ("2xx", *HTTP_FAILURES, *HTTP_CLIENT)]
        if any(key in d for key in keys):
            counts = {cls: d.get(f"{prefix}_{cls}", 0.0) for cls in (*HTTP_FAILURES, *HTTP_CLIENT)}
            classes = {cls: n for cls, n in counts.items() if n > 0}
            failed = sum(classes.get(cls, 0.0) for cls in HTTP_FAILURES)
            client = sum(classes.get(cls, 0.0) for cls in HTTP_CLIENT)
            return Outcomes(d.get(f"{prefix}_2xx", 0.0), failed, client, classes)
    names = [name for name in ("req_success", "req_failed", "req_aborted", "req_errored") if name in d]
    if names:
        engine = {
            "5xx": d.get("req_failed", 0.0),
            "aborted": d.get("req_aborted", 0.0),
            "error": d.get("req_errored", 0.0),
        }
        classes = {cls: n for cls, n in engine.items() if n > 0}
        return Outcomes(d.get("req_success", 0.0), sum(classes.values()), 0.0, classes)
    if "e2e" in window.hists:
        return Outcomes(window.hists["e2e"][-1][1], 0.0)
    return None


@dataclass(frozen=True)
class TopologyOutcomes:
    """What the clients saw, with the per-role outcomes behind it (the router's alone when collected)."""

    ok: float
    failed: float
    client: float
    roles: dict[str, Outcomes]

    @property
    def answered(self) -> float:
        return self.ok + self.failed + self.client


def topology_outcomes(role_windows: dict[str, Window]) -> TopologyOutcomes | None:
    """What the clients saw, from every role: in P/D a request is answered by decode after prefill, so
    the answered requests are decode's (or the aggregated pods'), and the failures are every role's (a
    prefill that answers 429 or 5xx fails the client's request before decode sees it); so are the
    client's errors (a prompt over the context is refused by whichever pod reads it first). A router's
    own counters, when its pods are collected, are what the clients saw and win."""
    per_role = {role: outcomes(window) for role, window in role_windows.items()}
    found = {role: value for role, value in per_role.items() if value is not None}
    if not found:
        return None
    if "router" in found:
        seen = found["router"]
        return TopologyOutcomes(seen.ok, seen.failed, seen.client, {"router": seen})
    answering: list[str] = [role for role in ("decode", "both") if role in found] or list(found)
    ok = sum(found[role].ok for role in answering)
    failed = sum(value.failed for value in found.values())
    client = sum(value.client for value in found.values())
    return TopologyOutcomes(ok, failed, client, found)


@dataclass(frozen=True)
class RequestWindow:
    """What the clients' requests did in one interval, for SLIs: the latency histograms' bucket
    increments where the client-visible latencies are recorded (decode, else every pod; see
    ``DECODE_FIRST``) and the outcomes the clients saw (``topology_outcomes``)."""

    ttft: Buckets
    itl: Buckets
    outcomes: TopologyOutcomes | None


def request_window(samples: Iterable[tuple[str, RawSample, RawSample | None]]) -> RequestWindow:
    """The interval's ``RequestWindow`` from each serving pod's (role, current, previous) raw samples,
    merged per role the way the snapshot merges them."""
    per_role: dict[str, list[Window]] = {}
    for role, current, previous in samples:
        per_role.setdefault(role, []).append(pod_window(current, previous)[0])
    role_windows = {role: merge(windows) for role, windows in per_role.items()}
    decode = role_windows.get("decode")
    merged = merge(role_windows.values()) if role_windows else Window()

    def hist(name: str) -> Buckets:
        if decode is not None and decode.hists.get(name):
            return decode.hists[name]
        return merged.hists.get(name) or []

    return RequestWindow(ttft=hist("ttft"), itl=hist("itl"), outcomes=topology_outcomes(role_windows))


def significant(value: float, digits: int = 5) -> float:
    """``value`` to a few significant digits: what a reading can honestly claim, and compact JSON."""
    return float(f"{value:.{digits}g}")


def topology_metrics(role_windows: dict[str, Window]) -> Metrics:
    """Topology-wide values: per field from the role where that value lives (see ``PREFILL_FIRST``)."""
    everything = metrics(merge(role_windows.values()))
    per_role = {role: metrics(window) for role, window in role_windows.items()}
    for name in PREFILL_FIRST:
        value = per_role.get("prefill", empty_metrics())[name]  # type: ignore[literal-required]
        if value is not None:
            everything[name] = value  # type: ignore[literal-required]
    for name in DECODE_FIRST:
        value = per_role.get("decode", empty_metrics())[name]  # type: ignore[literal-required]
        if value is not None:
            everything[name] = value  # type: ignore[literal-required]
    seen = topology_outcomes(role_windows)
    everything["success_rate"] = everything["error_rate"] = everything["client_error_rate"] = None
    if seen is not None and seen.answered > 0:
        everything["success_rate"] = significant(seen.ok / seen.answered)
        everything["error_rate"] = significant(seen.failed / seen.answered)
        everything["client_error_rate"] = significant(seen.client / seen.answered)
    return everything


HIT_RATE_WINDOW_S = 30.0
HitEntry = list[float]  # [ts, hits, queries] of one interval (a gauge engine: [ts, hit rate, 1])


def hit_rate_window(
    kept: list[HitEntry], role_windows: dict[str, Window], *, ts: float, span: float = HIT_RATE_WINDOW_S
) -> tuple[list[HitEntry], float | None]:
    """The topology's hit rate over the last ``span`` seconds, and the intervals to keep for the next.

    One interval's Δhits / Δqueries swings with the few requests that finished in it (33 % one update,
    95 % the next); Σ Δhits / Σ Δqueries over 30 s is stable and still follows a real change. The
    lookups are counted where they happen: on prefill when it counts them, else on every pod. An
    engine that exports only a hit-rate gauge (MindIE, SGLang) gets the mean of its readings."""
    entries = [e for e in kept if ts - span < e[0] < ts]
    chosen = role_windows.get("prefill")
    if chosen is None or "prefix_queries" not in chosen.deltas:
        chosen = merge(role_windows.values()) if role_windows else None
    if chosen is not None and chosen.has_deltas and "prefix_queries" in chosen.deltas:
        entries.append([ts, chosen.deltas.get("prefix_hits", 0.0), chosen.deltas["prefix_queries"]])
    elif chosen is not None and chosen.gauges.get("hit_rate"):
        entries.append([ts, sum(chosen.gauges["hit_rate"]) / len(chosen.gauges["hit_rate"]), 1.0])
    hits = sum(e[1] for e in entries)
    queries = sum(e[2] for e in entries)
    value = _ratio(hits, queries)
    return entries, significant(value) if value is not None else None
