"""One collection's scrape results + the state kept since the last one → a ``TopologySnapshot`` (PURE).

``CollectorState`` is what survives between collections of a topology (kept in Redis by
``telemetry.cache``): the previous raw sample of every pod, the last probe result of every link, where
each pod's log was last read, the LLM-DataDist cluster ids learnt from the logs, the SLO streaks and the
back-off of pods that keep failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypedDict

from telemetry.datapath import PodWindow
from telemetry.datapath import problems as datapath_problems
from telemetry.derive import (
    HitEntry,
    Window,
    hit_rate_window,
    merge,
    metrics,
    pod_window,
    topology_metrics,
    topology_outcomes,
)
from telemetry.health import SloMetric, SloTrack, evaluate_slo, pod_reason, slo_step, topology_health
from telemetry.links import EngineView, pair_link, pairs_of
from telemetry.logscan import ANCHOR, LogFinding, fresh_lines, scan
from telemetry.parse import RawSample
from telemetry.probe import ProbeResult
from telemetry.snapshot import (
    Event,
    LinkSample,
    PodSample,
    RoleSample,
    SloState,
    TopologySnapshot,
    Totals,
    empty_metrics,
)
from telemetry.tent import PREFIX as TENT_PREFIX
from telemetry.tent import has_tent, keep_previous_tent

SERVING_ROLES = ("prefill", "decode", "both")
PROBE_IDS_KEPT = 3


class Backoff(TypedDict):
    failures: int
    retry_at: float  # unix time before which the pod is not scraped again


class CollectorState(TypedDict):
    pods: dict[str, RawSample]
    probes: dict[str, ProbeResult]  # "prefill>decode" -> the last probe through that pair
    probe_ids: dict[str, list[str]]  # "prefill>decode" -> request ids of its last probes
    log_tails: dict[str, list[str]]  # pod -> the last lines read from its log
    clusters: dict[str, str]  # LLM-DataDist cluster id -> prefill device IP (from the decode logs)
    turn: int  # collections so far (probes go round when there are many pairs)
    slo: dict[str, SloTrack]
    backoff: dict[str, Backoff]
    hits: list[HitEntry]  # the last 30 s of prefix-cache lookups (``derive.hit_rate_window``)


def empty_state() -> CollectorState:
    return CollectorState(
        pods={}, probes={}, probe_ids={}, log_tails={}, clusters={}, turn=0, slo={}, backoff={}, hits=[]
    )


def pair_key(prefill: str, decode: str) -> str:
    return f"{prefill}>{decode}"


@dataclass
class LinkInputs:
    """What one collection read about the KV links besides the pods' metrics."""

    view: EngineView | None = None  # None: the topology has no KV connector (aggregated serving)
    probes: list[ProbeResult] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)  # pod -> recent log lines
    log_errors: dict[str, str] = field(default_factory=dict)  # pod -> why its log could not be read


@dataclass(frozen=True)
class PodTarget:
    """A pod to scrape, as the cluster reports it."""

    name: str
    role: str
    ip: str
    port: int
    ready: bool
    phase: str
    detail: str | None = None  # waiting/terminated reason, e.g. CrashLoopBackOff
    restarts: int = 0
    group: str = ""  # the serving group (Kthena): pods pair only inside their group
    container: str | None = None  # the serving container, when the pod has several (for its log)
    devices: tuple[str, ...] = ()  # its NPUs' device IPs (Ascend device plugin), named by LLM-DataDist
    tent_port: int | None = None  # Mooncake's transfer engine's own /metrics, read as part of this pod


@dataclass
class PodResult:
    target: PodTarget
    raw: RawSample | None = None
    error: str | None = None  # why /metrics could not be read (None when skipped by back-off)
    tent_error: str | None = None  # why the transfer engine's /metrics could not be read
    skipped: bool = False  # not scraped this interval (back-off)
    extra: dict[str, object] = field(default_factory=dict)


def backoff_after_failure(previous: Backoff | None, *, now: float, interval_s: float) -> Backoff:
    """Exponential back-off: skip 1, 2, 4, ... intervals (at most 30 s) after consecutive failures."""
    failures = (previous["failures"] if previous else 0) + 1
    delay = min(30.0, interval_s * (2 ** (failures - 2))) if failures > 1 else 0.0
    return Backoff(failures=failures, retry_at=now + delay)


def build_snapshot(
    *,
    topology_id: int,
    ts: float,
    interval_s: float,
    results: list[PodResult],
    state: CollectorState,
    slo_ttft_ms: float | None,
    slo_tbt_ms: float | None,
    open_alerts: set[str],
    alert_intervals: int,
    link_slow_ms: float,
    events: list[Event],
    link_inputs: LinkInputs | None = None,
) -> tuple[TopologySnapshot, CollectorState, dict[SloMetric, str]]:
    """Derive everything; returns the snapshot, the state to keep, and SLO alert actions
    (``{"ttft": "raise"}``...) for the caller to record."""
    new_state = CollectorState(
        pods={},
        probes={},
        probe_ids={},
        log_tails={},
        clusters=dict(state.get("clusters") or {}),
        turn=int(state.get("turn") or 0) + 1,
        slo=dict(state["slo"]),
        backoff={},
        hits=[],
    )
    windows: dict[str, Window] = {}
    pods: list[PodSample] = []
    pod_reasons: list[str] = []
    extra: list[str] = []
    for result in sorted(
        results,
        key=lambda r: (
            SERVING_ROLES.index(r.target.role) if r.target.role in SERVING_ROLES else 9,
            r.target.name,
        ),
    ):
        target = result.target
        previous = state["pods"].get(target.name)
        window: Window | None = None
        restarted = False
        if result.raw is not None:
            window, restarted = pod_window(result.raw, previous)
            # TENT's first sample (or the first after a gap) starts its window: no increments yet
            if not has_tent(previous):
                window.deltas = {k: v for k, v in window.deltas.items() if not k.startswith(TENT_PREFIX)}
            kept = keep_previous_tent(result.raw, previous) if result.tent_error else result.raw
            new_state["pods"][target.name] = kept
            windows[target.name] = window
        elif previous is not None:
            new_state["pods"][target.name] = previous
        if result.tent_error is not None:
            extra.append(f"{target.name}: {result.tent_error}")
        if result.error is not None:
            new_state["backoff"][target.name] = backoff_after_failure(
                state["backoff"].get(target.name), now=ts, interval_s=interval_s
            )
        elif result.skipped and target.name in state["backoff"]:
            new_state["backoff"][target.name] = state["backoff"][target.name]
        values = metrics(window) if window is not None else empty_metrics()
        pod = PodSample(
            **values,
            name=target.name,
            role=target.role,
            ip=target.ip,
            ready=target.ready,
            phase=target.phase,
            engine=result.raw["engine"] if result.raw else (previous["engine"] if previous else "unknown"),
            stale=result.raw is None,
            error=result.error
            or ("not scraped (back-off after repeated failures)" if result.skipped else None),
            restarted=restarted,
        )
        pods.append(pod)
        reason = pod_reason(pod, target.detail, target.restarts)
        if reason:
            pod_reasons.append(reason)

    links = _links(
        results, windows, state, new_state, link_inputs or LinkInputs(), ts, interval_s, link_slow_ms
    )
    for name, error in sorted((link_inputs.log_errors if link_inputs else {}).items()):
        extra.append(f"{name}: log unavailable, KV-link lines not read — {error}")

    role_windows: dict[str, Window] = {}
    roles: dict[str, RoleSample] = {}
    for role in SERVING_ROLES:
        members = [p for p in pods if p["role"] == role]
        if not members:
            continue
        role_windows[role] = merge(windows[p["name"]] for p in members if p["name"] in windows)
        roles[role] = RoleSample(
            **metrics(role_windows[role]), pods=len(members), ready=sum(1 for p in members if p["ready"])
        )
    totals_values = topology_metrics(role_windows) if role_windows else empty_metrics()
    new_state["hits"], hit_rate_30s = hit_rate_window(list(state.get("hits") or []), role_windows, ts=ts)
    totals = Totals(
        **totals_values,
        hit_rate_30s=hit_rate_30s,
        pods=len(pods),
        ready=sum(1 for p in pods if p["ready"]),
        links_up=sum(1 for link in links if link["state"] == "up"),
        links_degraded=sum(1 for link in links if link["state"] == "degraded"),
        links_unknown=sum(1 for link in links if link["state"] == "unknown"),
        links_down=sum(1 for link in links if link["state"] == "down"),
    )

    slo, per_metric = evaluate_slo(
        ttft_p95_s=totals["ttft_p95"], tbt_p95_s=totals["tbt_p95"], ttft_ms=slo_ttft_ms, tbt_ms=slo_tbt_ms
    )
    actions: dict[SloMetric, str] = {}
    for metric, metric_state in per_metric.items():
        actions_for = _step(new_state, metric, metric_state, metric in open_alerts, alert_intervals)
        if actions_for:
            actions[metric] = actions_for

    requests = topology_outcomes(role_windows)
    by_name = {r.target.name: r for r in results}
    pod_windows = [
        PodWindow(name, by_name[name].target.role, window, _block_size(by_name[name].raw))
        for name, window in windows.items()
    ]
    health = topology_health(
        pods=pods,
        links=links,
        slo=slo,
        pod_reasons=pod_reasons,
        extra=extra,
        requests=requests,
        interval_s=round(interval_s, 1),
        problems=datapath_problems(pod_windows, requests, round(interval_s, 1)),
    )
    snapshot = TopologySnapshot(
        topology_id=topology_id,
        ts=ts,
        interval_s=interval_s,
        health=health,
        slo=slo,
        totals=totals,
        roles=roles,
        pods=pods,
        links=links,
        events=events,
    )
    return snapshot, new_state, actions


def _block_size(raw: RawSample | None) -> int | None:
    """The engine's KV block size from ``vllm:cache_config_info{block_size}``, when it says."""
    value = raw["info"].get("block_size", "") if raw is not None else ""
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _step(
    state: CollectorState, metric: SloMetric, metric_state: SloState, is_open: bool, n: int
) -> str | None:
    track, action = slo_step(state["slo"].get(metric), metric_state, alert_open=is_open, intervals=n)
    state["slo"][metric] = track
    return action


def _links(
    results: list[PodResult],
    windows: dict[str, Window],
    state: CollectorState,
    new_state: CollectorState,
    inputs: LinkInputs,
    ts: float,
    interval_s: float,
    slow_ms: float,
) -> list[LinkSample]:
    """One sample per prefill → decode pair, from probes, connector metrics and log lines."""
    if inputs.view is None:
        return []
    findings: list[LogFinding] = []
    tails = state.get("log_tails") or {}
    own = {r.target.name: frozenset({r.target.ip, *r.target.devices} - {""}) for r in results}
    known = frozenset().union(*own.values()) if own else frozenset()
    for pod, lines in sorted(inputs.logs.items()):
        fresh = fresh_lines(tails.get(pod, []), lines)
        findings.extend(scan(pod, fresh, new_state["clusters"], own.get(pod, frozenset())))
        new_state["log_tails"][pod] = lines[-ANCHOR:] if lines else tails.get(pod, [])
    for pod, tail in tails.items():  # a pod whose log could not be read this time keeps its place
        new_state["log_tails"].setdefault(pod, tail)
    targets = [r.target for r in results if r.target.ip]
    prefills = [(t.name, t.ip, t.group) for t in targets if t.role == "prefill"]
    decodes = [(t.name, t.ip, t.group) for t in targets if t.role == "decode"]
    devices = {t.name: t.devices for t in targets}
    pairs = [
        replace(p, prefill_devices=devices[p.prefill], decode_devices=devices[p.decode])
        for p in pairs_of(prefills, decodes)
    ]
    probes = dict(state.get("probes") or {})
    ids = {key: list(value) for key, value in (state.get("probe_ids") or {}).items()}
    for p in inputs.probes:  # oldest first; a probe already taken in (it is kept for a while) is not new
        key = pair_key(p["prefill"], p["decode"])
        if key not in probes or p["ts"] >= probes[key]["ts"]:
            probes[key] = p
        if p["request_id"] not in ids.get(key, []):
            ids[key] = [*ids.get(key, []), p["request_id"]][-PROBE_IDS_KEPT:]
    per_decode: dict[str, int] = {}
    for pair in pairs:
        per_decode[pair.decode] = per_decode.get(pair.decode, 0) + 1
    raw_ts = {r.target.name: r.raw["ts"] for r in results if r.raw is not None}
    samples = []
    for pair in pairs:
        key = pair_key(pair.prefill, pair.decode)
        if key in probes:
            new_state["probes"][key] = probes[key]
            new_state["probe_ids"][key] = ids.get(key, [])
        samples.append(
            pair_link(
                pair=pair,
                view=inputs.view,
                window=windows.get(pair.decode),
                probe=probes.get(key),
                findings=findings,
                probe_requests=ids.get(key, []),
                known=known,
                links_of_decode=per_decode[pair.decode],
                now=ts,
                interval_s=interval_s,
                metrics_ts=raw_ts.get(pair.decode),
                slow_ms=slow_ms,
            )
        )
    return samples
