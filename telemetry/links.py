"""KV-link health per prefill → decode pair, from interfaces real engines have (PURE).

No engine labels its KV-transfer metrics by peer (docs/kv-links.md), so a pair's state is put together
from what can see it:

- **probe** — Tandem's own request through exactly this pair (``telemetry.probe``): the decode pod's
  answer (or its failure, or its silence), and the connector log lines that name the probe's request.
- **metrics** — the decode pod's connector families (``vllm:nixl_*``, ``vllm:mooncake_*``,
  ``sglang:kv_transfer_*``): transfer time, bytes and failures of the pod, shared by all its links.
- **log** — connector lines in the prefill and decode pods' logs (``telemetry.logscan``) that name this
  pair's peer or request; lines that cannot be tied to one pair count for the pods.

Rules (``link_state``):

- **down** — the probe's KV transfer failed (its decode answer failed, never came, or a connector line
  names the probe's request), or a log line names this pair's link or transfer as failed, or the
  decode pod has this one link only and its connector counted failed transfers while none (and no
  probe) got through in the interval (one peer: its link).
- **degraded** — the decode pod (with several links) counted failed transfers in this interval that no
  line ties to another pair, or its transfer-time p95 is above the slow threshold.
- **unknown** — nothing that can see this pair said anything in this interval (no probe possible, no
  connector metrics, no log lines); the link's ``blind`` list says what its engine cannot show.
- **up** — otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from telemetry.derive import Window, quantile, significant
from telemetry.logscan import LogFinding, for_pair
from telemetry.probe import PROBED_ENGINES, ProbeResult
from telemetry.snapshot import LinkSample, LinkSource, LinkSourceKind, LinkState

DEFAULT_SLOW_MS = 250.0
PROBE_STALE_INTERVALS = 3  # an older probe result still shows, but no longer decides the state


@dataclass(frozen=True)
class EngineView:
    """What an engine and connector expose about KV transfers (the table of docs/kv-links.md)."""

    metrics: str | None  # the connector's Prometheus families, or None
    logs: str | None  # the log lines Tandem reads, or None
    probed: bool
    blind: tuple[str, ...]


def engine_view(engine: str, connector: str) -> EngineView:
    vllm = engine in PROBED_ENGINES
    if vllm and connector == "nixl":
        return EngineView("vllm:nixl_*", "NIXL transfer failures by request id", True, (NO_PEER_LABEL,))
    if vllm and connector in ("mooncake", "mooncake-store"):
        return EngineView(
            "vllm:mooncake_*",
            "Mooncake transfer failures by request id (prefill side)",
            True,
            (NO_PEER_LABEL,),
        )
    if vllm and connector == "llm-datadist":
        return EngineView(
            None,
            "LLM-DataDist link and pull_blocks lines (peer by cluster id)",
            True,
            ("LLM-DataDist exports no transfer metrics: no transfer time or bytes per link or per pod",),
        )
    if vllm:
        return EngineView(
            None, None, True, (f"the {connector} connector exports no transfer metrics Tandem reads",)
        )
    if engine == "sglang":
        return EngineView(
            "sglang:kv_transfer_*",
            "SGLang lost-connection lines naming the prefill bootstrap address",
            False,
            (NO_PEER_LABEL, "SGLang pairs requests by bootstrap room: Tandem sends no probe through a pair"),
        )
    return EngineView(
        None,
        None,
        False,
        (
            f"{engine} exports no KV-transfer metrics and names no peer in its logs",
            f"{engine} pairs instances through its own coordinator: Tandem sends no probe through a pair",
        ),
    )


NO_PEER_LABEL = (
    "connector metrics carry no peer label: transfer figures are the decode pod's, for all its links"
)


@dataclass(frozen=True)
class PairInput:
    prefill: str
    decode: str
    prefill_ip: str
    decode_ip: str
    prefill_devices: tuple[str, ...] = ()  # NPU device IPs (the Ascend device plugin's annotation)
    decode_devices: tuple[str, ...] = ()


KV_WORDS = ("kv", "transfer", "llm_", "pull", "link")


def probe_says_link_failed(probe: ProbeResult) -> bool:
    """A probe's decode step failing says the link failed when the decode pod never answered (a hung
    KV pull looks like that) or answered a server error about the KV transfer; any other answer (503
    overloaded, 429, 401) says the decode pod refused the request, which says nothing about the link."""
    if probe["status"] is None:
        return True
    text = (probe["error"] or "").lower()
    return probe["status"] >= 500 and probe["status"] != 503 and any(word in text for word in KV_WORDS)


def link_state(
    *, probe_failed: bool, pair_failures: int, pod_failures: float, p95_ms: float | None, slow_ms: float,
    seen: bool,
) -> LinkState:  # fmt: skip
    if probe_failed or pair_failures > 0:
        return "down"
    if pod_failures > 0 or (p95_ms is not None and p95_ms > slow_ms):
        return "degraded"
    return "up" if seen else "unknown"


@dataclass(frozen=True)
class Connector:
    """The decode pod's connector in one interval."""

    transfers: float = 0.0
    failed: float = 0.0
    p50_ms: float | None = None
    p95_ms: float | None = None
    mean_ms: float | None = None  # Δsum / Δcount of the transfer-time histogram: exact, not interpolated
    bytes_per_s: float | None = None


# The canonical fields a connector's Prometheus families give (telemetry.parse): a decode pod exporting
# none of them has no such family at all (vLLM 0.32's Mooncake connector: ``mooncake/stats.py`` has no
# Prometheus class yet; 0.33 adds ``vllm:mooncake_*``), which is no evidence, never "0 transfers".
CONNECTOR_FIELDS = frozenset(
    {"xfer_time", "xfer_bytes", "xfer_failed", "xfer_failed_recvs", "xfer_failed_notifications",
     "xfer_expired", "bootstrap_failed", "kv_transfer_latency_ms", "kv_transfer_speed_gb_s"}
)  # fmt: skip


def connector_exported(window: Window | None) -> bool:
    return window is not None and bool(CONNECTOR_FIELDS & window.present)


def _connector(window: Window | None) -> Connector:
    """Transfers, failures, transfer time and bytes/s of the decode pod's connector in this interval."""
    if window is None or not window.has_deltas:
        return Connector()
    d = window.deltas
    failed = sum(d.get(k, 0.0) for k in ("xfer_failed", "xfer_failed_recvs", "xfer_failed_notifications"))
    failed += d.get("bootstrap_failed", 0.0)
    hist = window.hists.get("xfer_time")
    transfers, p50, p95 = 0.0, None, None
    if hist:
        transfers = hist[-1][1]
        q50, q95 = quantile(hist, 0.5), quantile(hist, 0.95)
        p50 = q50 * 1000 if q50 is not None else None
        p95 = q95 * 1000 if q95 is not None else None
    elif window.gauges.get("kv_transfer_latency_ms"):  # SGLang: the latest transfer's latency, a gauge
        latest = max(window.gauges["kv_transfer_latency_ms"])
        p50 = p95 = latest if latest > 0 else None
    rate = d["xfer_bytes_sum"] / window.seconds if "xfer_bytes_sum" in d and window.seconds > 0 else None
    mean = d["xfer_time_sum"] / transfers * 1000 if transfers > 0 and "xfer_time_sum" in d else None
    return Connector(transfers, failed, p50, p95, mean, rate)


def pair_link(
    *,
    pair: PairInput,
    view: EngineView,
    window: Window | None,
    probe: ProbeResult | None,
    findings: list[LogFinding],
    probe_requests: list[str] | None = None,
    known: frozenset[str] | None = None,
    links_of_decode: int,
    now: float,
    interval_s: float,
    metrics_ts: float | None,
    slow_ms: float = DEFAULT_SLOW_MS,
) -> LinkSample:
    """The state, figures, sources and blind spots of one link. ``probe_requests``: the request ids of
    this pair's recent probes (a connector logs a failure after the probe's answer, so the line about a
    probe is often read one interval later)."""
    sources: list[LinkSource] = []
    reasons: list[str] = []
    seen = False
    probe_failed = False
    probe_ms = None
    fresh_probe = probe is not None and now - probe["ts"] <= interval_s * PROBE_STALE_INTERVALS
    if probe is not None:
        when = probe["ts"]
        if probe["ok"]:
            probe_ms = probe["ms"]
            detail = f"probe through the pair answered in {probe['ms']:.0f} ms"
            if probe.get("by_prompt"):
                detail += (
                    " (its connector hands KV over by prompt and returns no kv_transfer_params: the "
                    "probe shows both pods serve, the decode's external-KV tokens show the transfers)"
                )
            sources.append(_source(kind="probe", detail=detail, ts=when))
        elif probe["stage"] == "decode":
            sources.append(_source(kind="probe", detail=f"probe failed at decode: {probe['error']}", ts=when))
        else:
            sources.append(_source(kind="probe", detail=f"probe could not start: {probe['error']}", ts=when))
        if fresh_probe and probe["stage"] == "decode" and probe_says_link_failed(probe):
            probe_failed, seen = True, True
            reasons.append(f"Tandem's probe from {pair.prefill} to {pair.decode} failed: {probe['error']}")
        elif fresh_probe and probe["stage"] is not None:
            reasons.append(f"the pair could not be tested: {probe['error']}")
        elif fresh_probe and probe["ok"]:
            seen = True
    mine, unattributed = for_pair(
        findings,
        prefill=pair.prefill,
        decode=pair.decode,
        prefill_ip=pair.prefill_ip,
        decode_ip=pair.decode_ip,
        probe_requests=probe_requests
        if probe_requests is not None
        else ([probe["request_id"]] if probe else []),
        prefill_devices=pair.prefill_devices,
        decode_devices=pair.decode_devices,
        known=known,
    )
    status_code = next((f["code"] for f in mine if f["code"]), None)
    for finding in mine:
        seen = True
        sources.append(_source(kind="log", detail=f"{finding['pod']}: {finding['line']}", ts=now))
    if mine:
        what = "the probe's KV transfer" if any(f["request"] for f in mine) else "KV transfers"
        reasons.insert(
            0,
            f"{what} from {pair.prefill} to {pair.decode} failed: {mine[0]['pod']} logged: {mine[0]['line']}",
        )
    conn = _connector(window)
    transfers, pod_failed, p95 = conn.transfers, conn.failed, conn.p95_ms
    blind = list(view.blind)
    if view.metrics and window is not None and window.has_deltas and connector_exported(window):
        seen = seen or transfers > 0 or pod_failed > 0  # an idle connector says nothing about the link
        text = f"{view.metrics} on {pair.decode}: {transfers:.0f} transfers, {pod_failed:.0f} failed"
        sources.append(_source(kind="metrics", detail=text, ts=metrics_ts))
    elif view.metrics and window is not None and window.present:
        absent = f"{pair.decode} exports no {view.metrics} family: its engine version's connector has none"
        blind.insert(0, absent)
        sources.append(_source(kind="metrics", detail=f"{absent} (no evidence, not zero)", ts=metrics_ts))
    pod_failures = pod_failed if not mine else 0.0
    if unattributed and not mine:
        pod_failures = max(pod_failures, float(len(unattributed)))
        sources.append(
            _source(kind="log", detail=f"{unattributed[0]['pod']}: {unattributed[0]['line']}", ts=now)
        )
    # A decode pod with one link has one peer: what its connector failed, it failed on this link; with
    # no transfer (and no probe) getting through in the interval, the link is down, not degraded.
    probe_through = fresh_probe and probe is not None and probe["ok"]
    only_link = links_of_decode == 1 and pod_failures > 0 and transfers == 0 and not probe_through
    pair_failures = len(mine) + (math.ceil(pod_failures) if only_link else 0)
    state = link_state(
        probe_failed=probe_failed, pair_failures=pair_failures,
        pod_failures=0.0 if only_link else pod_failures, p95_ms=p95, slow_ms=slow_ms, seen=seen,
    )  # fmt: skip
    shared = links_of_decode > 1 and view.metrics is not None
    if only_link and not mine and not probe_failed:
        where = "its connector metrics" if pod_failed else "its log"
        reasons.insert(
            0,
            f"{pair.decode} counted {pod_failures:.0f} failed KV transfers in the last {interval_s:g} s in "
            f"{where}, and {pair.prefill} is its only prefill peer: KV transfers over this link fail",
        )
    if state == "degraded" and not reasons:
        window_text = f"in the last {interval_s:g} s"
        if pod_failures > 0:
            where = "its connector metrics" if pod_failed else "its log"
            tail = (
                f" (shared by its {links_of_decode} links: {NO_PEER_LABEL.split(':')[0]})" if shared else ""
            )
            reasons.append(
                f"{pair.decode} counted {pod_failures:.0f} failed KV transfers {window_text} in {where}{tail}"
            )
        else:
            reasons.append(
                f"KV transfers into {pair.decode} are slow: p95 {p95:.0f} ms (threshold {slow_ms:.0f} ms)"
            )
    if state == "unknown":
        reasons.append(
            f"nothing that can see {pair.prefill} → {pair.decode} reported in this interval: "
            + "; ".join(blind)
        )
    observed = [s["ts"] for s in sources if s["ts"] is not None]
    return LinkSample(
        prefill=pair.prefill,
        decode=pair.decode,
        state=state,
        status_code=status_code,
        xfer_p50_ms=_sig(conn.p50_ms),
        xfer_p95_ms=_sig(conn.p95_ms),
        xfer_mean_ms=_sig(conn.mean_ms),
        bytes_per_s=_sig(conn.bytes_per_s),
        transfers=int(transfers),
        failed=int(len(mine) if mine else pod_failures),
        reason="; ".join(reasons) if state != "up" and reasons else None,
        probe_ms=significant(probe_ms) if probe_ms is not None else None,
        shared=shared,
        sources=sources,
        observed_at=max(observed) if observed else None,
        blind=blind,
    )


MAX_DETAIL = 240  # characters of a source's text kept in the snapshot (it goes to every open page)


def _source(*, kind: LinkSourceKind, detail: str, ts: float | None) -> LinkSource:
    text = detail if len(detail) <= MAX_DETAIL else detail[: MAX_DETAIL - 1] + "…"
    return LinkSource(kind=kind, detail=text, ts=ts)


def _sig(value: float | None) -> float | None:
    return significant(value) if value is not None else None


def pairs_of(prefills: list[tuple[str, str, str]], decodes: list[tuple[str, str, str]]) -> list[PairInput]:
    """Every prefill → decode pair that can exchange KV: (name, ip, group) per pod; pods of a Kthena
    serving group only pair inside their group (no group: every pair)."""
    out = []
    for p_name, p_ip, p_group in prefills:
        for d_name, d_ip, d_group in decodes:
            if p_group and d_group and p_group != d_group:
                continue
            out.append(PairInput(prefill=p_name, decode=d_name, prefill_ip=p_ip, decode_ip=d_ip))
    return out
