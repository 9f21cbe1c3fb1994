"""KV-link health per prefill↔decode pair (PURE).

Inputs per decode pod: its link table (``GET /kv/links``: LLM-DataDist semantics — the decode side
opens links to prefill instances and keeps a status code and transfer counts per link), the table of
the previous collection (for per-interval increments), and the pod's connector-metric window
(``xfer_time`` / ``xfer_bytes`` histograms, ``xfer_failed`` counter from nixl_* / mooncake_* /
sglang transfer families).

Rules (``link_state``):

- **down** — the link's status code says the link is unusable (``LLM_LINK_FAILED``,
  ``LLM_WAIT_PROCESS_TIMEOUT``, ``LLM_NOT_YET_LINK``), or transfers over it failed in this interval
  and none succeeded. Both pods may well be Ready: this is exactly the silent break operators miss.
- **degraded** — some (not all) transfers failed in this interval, or the transfer-time p95 is above
  the slow threshold (``settings.TELEMETRY_LINK_SLOW_MS``, default 250 ms).
- **up** — otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from telemetry.derive import Window, quantile, significant
from telemetry.snapshot import LinkSample, LinkState

DOWN_CODES = frozenset({"LLM_LINK_FAILED", "LLM_WAIT_PROCESS_TIMEOUT", "LLM_NOT_YET_LINK"})
OK_CODES = frozenset({"LLM_SUCCESS", "LLM_EXIST_LINK", "LLM_KV_CACHE_NOT_EXIST"})
ADVICE: dict[str, str] = {
    "LLM_WAIT_PROCESS_TIMEOUT": "the link must be re-established",
    "LLM_LINK_FAILED": "check the network between them (RDMA/HCCL ports, IPs) and re-link",
    "LLM_NOT_YET_LINK": "the link was never opened; the prefill side may not be initialised yet",
}
DEFAULT_SLOW_MS = 250.0


class LinkEntry(TypedDict):
    """One row of a decode pod's link table, engine-neutral; counters are cumulative.

    ``transfers`` counts successful transfers, ``failures`` failed ones (as LLM-DataDist reports)."""

    peer: str  # prefill pod name (or its address when the name is unknown)
    status_code: str | None
    transfers: float
    failures: float
    bytes: float
    xfer_ms_total: float | None  # cumulative transfer time, when the table reports it
    xfer_ms_p50: float | None  # the engine's own recent-latency figures, when it reports them
    xfer_ms_p95: float | None


def _num(row: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _xfer_ms_total(row: Mapping[str, Any]) -> float | None:
    seconds = _num(row, "xfer_seconds_sum")
    return seconds * 1000 if seconds is not None else _num(row, "xfer_ms_total", "transfer_ms_total")


def normalize_table(payload: Any, pod_by_address: Mapping[str, str]) -> list[LinkEntry]:
    """Read a ``/kv/links`` answer (``{"links": [...]}`` or a bare list) into ``LinkEntry`` rows."""
    rows = payload.get("links", []) if isinstance(payload, Mapping) else payload
    if not isinstance(rows, list):
        raise ValueError("link table is not a list of links")
    entries: list[LinkEntry] = []
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        address = str(row.get("peer_address") or row.get("remote") or row.get("address") or "")
        host = address.rsplit(":", 1)[0] if address else ""
        peer = str(row.get("peer_pod") or row.get("peer") or "") or pod_by_address.get(host, address)
        if not peer:
            continue
        if peer in pod_by_address:  # the table named an address in the peer field
            peer = pod_by_address[peer]
        code = row.get("status_code") or row.get("status") or row.get("code")
        entries.append(
            LinkEntry(
                peer=peer,
                status_code=str(code) if code else None,
                transfers=_num(row, "transfers", "transfer_count", "pulls") or 0.0,
                failures=_num(row, "failures", "failed", "failed_transfers") or 0.0,
                bytes=_num(row, "bytes", "bytes_transferred") or 0.0,
                xfer_ms_total=_xfer_ms_total(row),
                xfer_ms_p50=_num(row, "xfer_ms_p50", "latency_ms_p50"),
                xfer_ms_p95=_num(row, "xfer_ms_p95", "latency_ms_p95"),
            )
        )
    return entries


def link_state(
    *, status_code: str | None, transfers: float, failed: float, p95_ms: float | None, slow_ms: float
) -> LinkState:
    if status_code in DOWN_CODES:
        return "down"
    if failed > 0 and transfers <= 0:
        return "down"
    if failed > 0 or (p95_ms is not None and p95_ms > slow_ms):
        return "degraded"
    return "up"


def link_reason(
    *,
    prefill: str,
    decode: str,
    state: LinkState,
    status_code: str | None,
    transfers: float,
    failed: float,
    p95_ms: float | None,
    slow_ms: float,
    interval_s: float,
) -> str | None:
    """The sentence an operator reads on the topology's health banner."""
    if state == "up":
        return None
    window = f"in the last {interval_s:g} s"
    if status_code in DOWN_CODES:
        if status_code == "LLM_NOT_YET_LINK":
            return f"{decode} has no KV link to {prefill} (LLM_NOT_YET_LINK); {ADVICE[status_code]}"
        return f"{decode} cannot pull KV from {prefill}: {status_code}; {ADVICE[status_code]}"
    if state == "down":
        return (
            f"{decode} cannot pull KV from {prefill}: all {failed:.0f} transfers failed {window}; "
            "check the link and re-establish it"
        )
    if failed > 0:
        total = transfers + failed
        return f"{failed:.0f} of {total:.0f} KV transfers from {prefill} to {decode} failed {window}"
    return (
        f"KV transfers from {prefill} to {decode} are slow: p95 {p95_ms:.0f} ms (threshold {slow_ms:.0f} ms)"
    )


def _increment(now: float, before: float | None, reset: bool) -> float:
    if before is None:
        return 0.0
    return max(0.0, now) if reset else max(0.0, now - before)


def decode_links(
    *,
    decode: str,
    table: list[LinkEntry],
    previous: list[LinkEntry] | None,
    window: Window | None,
    interval_s: float,
    slow_ms: float = DEFAULT_SLOW_MS,
) -> list[LinkSample]:
    """Link samples of one decode pod, one per prefill peer in its table."""
    before = {entry["peer"]: entry for entry in previous or []}
    rows = []
    for entry in table:
        prev = before.get(entry["peer"])
        reset = prev is not None and (
            entry["transfers"] < prev["transfers"] or entry["failures"] < prev["failures"]
        )
        transfers = _increment(entry["transfers"], prev["transfers"] if prev else None, reset)
        failed = _increment(entry["failures"], prev["failures"] if prev else None, reset)
        moved = _increment(entry["bytes"], prev["bytes"] if prev else None, reset)
        rows.append((entry, prev, transfers, failed, moved, reset))

    active = [row for row in rows if row[2] > 0]
    seconds = window.seconds if window is not None and window.seconds > 0 else interval_s
    pod_hist = window.hists.get("xfer_time") if window is not None else None
    samples: list[LinkSample] = []
    for entry, prev, transfers, failed, moved, reset in rows:
        p50 = entry["xfer_ms_p50"]
        p95 = entry["xfer_ms_p95"]
        if (p50 is None or p95 is None) and pod_hist and len(active) == 1 and active[0][0] is entry:
            q50, q95 = quantile(pod_hist, 0.5), quantile(pod_hist, 0.95)
            p50 = q50 * 1000 if q50 is not None else None
            p95 = q95 * 1000 if q95 is not None else None
        total, earlier = entry["xfer_ms_total"], prev["xfer_ms_total"] if prev else None
        if p50 is None and total is not None and earlier is not None and transfers > 0:
            # Several links share the pod's histogram: the link's own mean stands in for both figures.
            p50 = max(0.0, total - (0.0 if reset else earlier)) / transfers
            p95 = p95 if p95 is not None else p50
        state = link_state(
            status_code=entry["status_code"], transfers=transfers, failed=failed, p95_ms=p95, slow_ms=slow_ms
        )
        samples.append(
            LinkSample(
                prefill=entry["peer"],
                decode=decode,
                state=state,
                status_code=entry["status_code"],
                xfer_p50_ms=significant(p50) if p50 is not None else None,
                xfer_p95_ms=significant(p95) if p95 is not None else None,
                bytes_per_s=significant(moved / seconds) if prev is not None else None,
                transfers=int(transfers),
                failed=int(failed),
                reason=link_reason(
                    prefill=entry["peer"],
                    decode=decode,
                    state=state,
                    status_code=entry["status_code"],
                    transfers=transfers,
                    failed=failed,
                    p95_ms=p95,
                    slow_ms=slow_ms,
                    interval_s=round(seconds, 1),
                ),
            )
        )
    return samples


def connector_failure_reason(*, pod: str, window: Window | None, interval_s: float) -> str | None:
    """A pod-level sentence when connector metrics show failed transfers but no link table names a peer."""
    if window is None or not window.has_deltas:
        return None
    failed = window.deltas.get("xfer_failed", 0.0) + window.deltas.get("xfer_failed_recvs", 0.0)
    if failed <= 0:
        return None
    return f"{pod}: {failed:.0f} KV transfers failed in the last {interval_s:g} s (connector metrics)"
