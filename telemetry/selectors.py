"""Telemetry reads for the dashboard and the API: latest snapshot, history, events, overview rows."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, cast

from django.conf import settings
from django.db.models import QuerySet

from audit.models import AuditEvent
from telemetry import cache
from telemetry.models import LatestSnapshot, Point, Rollup, Series, TelemetryAlert
from telemetry.snapshot import Event, EventKind, Health, Slo, TopologySnapshot

STALE_INTERVALS = 3
RAW_WINDOW = timedelta(hours=1)  # windows up to this long read raw points; longer ones read rollups
MAX_BUCKETS = 2000
EVENT_LIMIT = 20
_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)

DEPLOY_ACTIONS = {
    "topology.deploy": "deploy of revision {revision}",
    "topology.rollback": "roll back to revision {revision}",
    "topology.scale": "scale of {role} to {replicas}",
    "topology.reapply": "re-apply of revision {revision}",
}


def _mark_stale(snapshot: TopologySnapshot, now: float) -> TopologySnapshot:
    age = now - snapshot["ts"]
    if age > STALE_INTERVALS * max(snapshot["interval_s"], 1.0):
        snapshot = cast("TopologySnapshot", dict(snapshot))
        snapshot["health"] = Health(
            state="stale", reasons=[f"no telemetry for {age:.0f} s", *snapshot["health"]["reasons"]]
        )
    return snapshot


def latest_snapshot(*, topology_id: int) -> TopologySnapshot | None:
    """The latest snapshot (Redis, else the database), marked ``stale`` when it is old."""
    snapshot = cache.get_snapshot(topology_id)
    if snapshot is None:
        row = LatestSnapshot.objects.filter(topology_id=topology_id).first()
        if row is None:
            return None
        snapshot = cast("TopologySnapshot", row.data)
    return _mark_stale(snapshot, time.time())


def _event_text(event: AuditEvent) -> tuple[EventKind, str] | None:
    detail: dict[str, Any] = event.detail or {}
    action = event.action
    if action in ("telemetry.alert_raised", "telemetry.alert_resolved"):
        kind: EventKind = "alert_raised" if action.endswith("raised") else "alert_resolved"
        return kind, str(detail.get("message") or action)
    if "role" in action.split(".")[-1] or "rebalanc" in action or "switch" in action:
        if detail.get("text"):  # rebalancing decisions and moves carry their own explanation
            return "role_change", str(detail["text"])
        return "role_change", f"{action.split('.')[-1].replace('_', ' ')} by {event.actor_label}"
    if action in DEPLOY_ACTIONS:
        values = {k: detail.get(k, "?") for k in ("revision", "role", "replicas")}
        return "deploy", f"{DEPLOY_ACTIONS[action].format(**values)} by {event.actor_label}"
    return None


def events_between(*, topology_id: int, start: float, end: float, limit: int = 500) -> list[Event]:
    """Deploys, role changes and SLO alerts of a topology in [start, end], oldest first."""
    rows = AuditEvent.objects.filter(
        target_type="topologies.topology",
        target_id=str(topology_id),
        created__gte=datetime.fromtimestamp(start, tz=UTC),
        created__lte=datetime.fromtimestamp(end, tz=UTC),
    ).order_by("-created")[:limit]
    events = []
    for row in rows:
        described = _event_text(row)
        if described is not None:
            events.append(Event(ts=row.created.timestamp(), kind=described[0], text=described[1]))
    return sorted(events, key=lambda e: e["ts"])


def recent_events(*, topology_id: int, since: float) -> list[Event]:
    return events_between(topology_id=topology_id, start=since, end=time.time() + 1)[-EVENT_LIMIT:]


def auto_step(seconds: float) -> int:
    """A round step giving about 300 buckets over the window (never below the collection interval)."""
    wanted = max(float(settings.TELEMETRY_INTERVAL_SECONDS), seconds / 300)
    return next((s for s in _STEPS if s >= wanted), _STEPS[-1])


class History(TypedDict):
    start: float
    end: float
    step: int
    source: str  # raw | rollup
    timestamps: list[float]  # bucket starts, aligned to multiples of step
    series: dict[str, list[float | None]]  # mean per bucket, None where there is no data
    events: list[Event]


def series_totals(*, topology_id: int, names: list[str], start: float, end: float) -> dict[str, float | None]:
    """The sum of each named series' points in [start, end) (for series of per-interval increments:
    ``router.*``); raw points within the last 24 hours, else the minutes' rollups (mean × count). None
    for a series without a point in the window."""
    since = datetime.fromtimestamp(start, tz=UTC)
    until = datetime.fromtimestamp(end, tz=UTC)
    ids = dict(Series.objects.filter(topology_id=topology_id, name__in=names).values_list("id", "name"))
    totals: dict[str, float | None] = dict.fromkeys(names)
    rows: Any
    if start >= time.time() - 24 * 3600:
        rows = Point.objects.filter(series_id__in=ids, ts__gte=since, ts__lt=until).values_list(
            "series_id", "value"
        )
    else:
        rows = Rollup.objects.filter(series_id__in=ids, ts__gte=since, ts__lt=until).values_list(
            "series_id", "avg", "count"
        )
    for row in rows.iterator(chunk_size=5000):
        value = row[1] * (row[2] if len(row) > 2 else 1)
        totals[ids[row[0]]] = (totals[ids[row[0]]] or 0.0) + value
    return totals


def history(*, topology_id: int, names: list[str], start: float, end: float, step: int) -> History:
    """Step-aligned mean values of the named series in [start, end)."""
    first = math.floor(start / step) * step
    count = max(0, math.ceil((end - first) / step))
    timestamps = [float(first + i * step) for i in range(count)]
    since = datetime.fromtimestamp(first, tz=UTC)
    until = datetime.fromtimestamp(end, tz=UTC)
    raw_from = time.time() - 24 * 3600
    use_raw = (end - start) <= RAW_WINDOW.total_seconds() and start >= raw_from
    ids = dict(Series.objects.filter(topology_id=topology_id, name__in=names).values_list("id", "name"))
    sums: dict[str, list[float]] = {name: [0.0] * count for name in names}
    weights: dict[str, list[float]] = {name: [0.0] * count for name in names}
    rows: Any
    if use_raw:
        rows = Point.objects.filter(series_id__in=ids, ts__gte=since, ts__lt=until).values_list(
            "series_id", "ts", "value"
        )
        rows = ((sid, ts, value, 1.0) for sid, ts, value in rows.iterator(chunk_size=5000))
    else:
        rows = Rollup.objects.filter(series_id__in=ids, ts__gte=since, ts__lt=until).values_list(
            "series_id", "ts", "avg", "count"
        )
        rows = ((sid, ts, value, float(n)) for sid, ts, value, n in rows.iterator(chunk_size=5000))
    for sid, ts, value, weight in rows:
        index = int((ts.timestamp() - first) // step)
        if 0 <= index < count:
            name = ids[sid]
            sums[name][index] += value * weight
            weights[name][index] += weight
    series = {
        name: [s / w if w else None for s, w in zip(sums[name], weights[name], strict=True)] for name in names
    }
    return History(
        start=float(first),
        end=end,
        step=step,
        source="raw" if use_raw else "rollup",
        timestamps=timestamps,
        series=series,
        events=events_between(topology_id=topology_id, start=first, end=end),
    )


def series_names(*, topology_id: int) -> list[str]:
    return sorted(Series.objects.filter(topology_id=topology_id).values_list("name", flat=True))


def topology_alerts(*, topology_id: int) -> QuerySet[TelemetryAlert]:
    return TelemetryAlert.objects.filter(topology_id=topology_id).order_by("-raised", "-id")


class OverviewRow(TypedDict):
    topology_id: int
    name: str
    cluster_id: int
    cluster_name: str
    namespace: str
    engine: str
    deployed: bool
    health: Health
    slo: Slo
    hit_rate: float | None  # over the last 30 s (``totals.hit_rate_30s``), else the last interval's
    ttft_p95: float | None  # seconds
    tbt_p95: float | None  # seconds
    gen_tps: float | None  # generated tokens per second
    pods: int
    ready: int
    links_down: int
    open_alerts: int
    ts: float | None
    rollout: dict[str, Any]  # deployments.rollout.Rollout: desired/running revision, last attempt failed


def stable_hit_rate(totals: Mapping[str, Any]) -> float | None:
    """The hit rate a page shows: over the last 30 s when known, else the last interval's."""
    value = totals.get("hit_rate_30s")
    return value if value is not None else totals.get("hit_rate")


_SEVERITY = {"down": 0, "stale": 1, "degraded": 2, "unknown": 3, "healthy": 4}


def overview_rows() -> list[OverviewRow]:
    """Every topology of every cluster with health, SLO, hit rate and TTFT; problems first."""
    from deployments.rollout import rollouts
    from topologies.models import Topology

    topologies = list(
        Topology.objects.select_related("cluster", "current_revision", "deployed_revision").order_by(
            "cluster__name", "name"
        )
    )
    rollout = rollouts(topologies)
    ids = [t.pk for t in topologies]
    snapshots = cache.get_snapshots(ids)
    missing = [i for i in ids if i not in snapshots]
    if missing:
        for row in LatestSnapshot.objects.filter(topology_id__in=missing):
            snapshots[row.topology_id] = cast("TopologySnapshot", row.data)
    alerts: dict[int, int] = {}
    for topology_id in TelemetryAlert.objects.filter(topology_id__in=ids, resolved__isnull=True).values_list(
        "topology_id", flat=True
    ):
        alerts[topology_id] = alerts.get(topology_id, 0) + 1
    now = time.time()
    rows: list[OverviewRow] = []
    for topology in topologies:
        snapshot = snapshots.get(topology.pk)
        snapshot = _mark_stale(snapshot, now) if snapshot else None
        deployed = topology.deployed_revision_id is not None
        health = (
            snapshot["health"]
            if snapshot
            else Health(state="unknown", reasons=["no telemetry yet" if deployed else "not deployed"])
        )
        slo = (
            snapshot["slo"]
            if snapshot
            else Slo(
                ttft_ms=topology.slo_ttft_ms,
                tbt_ms=topology.slo_tbt_ms,
                ttft_p95_ms=None,
                tbt_p95_ms=None,
                state="unknown",
            )
        )
        totals = snapshot["totals"] if snapshot else None
        rows.append(
            OverviewRow(
                topology_id=topology.pk,
                name=topology.name,
                cluster_id=topology.cluster_id,
                cluster_name=topology.cluster.name,
                namespace=topology.namespace,
                engine=topology.engine,
                deployed=deployed,
                health=health,
                slo=slo,
                hit_rate=stable_hit_rate(totals) if totals else None,
                ttft_p95=totals["ttft_p95"] if totals else None,
                tbt_p95=totals["tbt_p95"] if totals else None,
                gen_tps=totals["gen_tps"] if totals else None,
                pods=totals["pods"] if totals else 0,
                ready=totals["ready"] if totals else 0,
                links_down=totals["links_down"] if totals else 0,
                open_alerts=alerts.get(topology.pk, 0),
                ts=snapshot["ts"] if snapshot else None,
                rollout=dict(rollout[topology.pk]),
            )
        )
    rows.sort(
        key=lambda r: (
            1 if r["rollout"]["problem"] else _SEVERITY.get(r["health"]["state"], 5) if r["deployed"] else 6,
            0 if r["slo"]["state"] == "violated" else 1,
            -r["open_alerts"],
            r["cluster_name"],
            r["name"],
        )
    )
    return rows


class ClusterRow(TypedDict):
    cluster_id: int
    name: str
    health_state: str  # the cluster's own health (clusters app): healthy | degraded | unreachable | unknown
    topologies: int
    problems: int  # topologies that are down, stale or degraded


def overview_clusters(rows: list[OverviewRow] | None = None) -> list[ClusterRow]:
    """Every registered cluster (also those without topologies), clusters with problems first."""
    from clusters.models import Cluster

    rows = overview_rows() if rows is None else rows
    counts: dict[int, list[int]] = {}
    for row in rows:
        count = counts.setdefault(row["cluster_id"], [0, 0])
        count[0] += 1
        count[1] += row["deployed"] and row["health"]["state"] in ("down", "stale", "degraded")
    clusters = [
        ClusterRow(
            cluster_id=cluster.pk,
            name=cluster.name,
            health_state=cluster.health_state,
            topologies=counts.get(cluster.pk, [0, 0])[0],
            problems=counts.get(cluster.pk, [0, 0])[1],
        )
        for cluster in Cluster.objects.order_by("name")
    ]
    return sorted(clusters, key=lambda c: (-c["problems"], c["health_state"] == "healthy", c["name"]))


def overview_summaries() -> list[OverviewRow]:
    """Alias used by the overview websocket on connect."""
    return overview_rows()


def topology_live_context(topology: Any) -> dict[str, Any]:
    """Context for the topology page's live panel."""
    return {
        "topology": topology,
        "snapshot": latest_snapshot(topology_id=topology.pk),
        "interval_s": float(settings.TELEMETRY_INTERVAL_SECONDS),
    }


def raw_points(
    *, topology_id: int, prefixes: tuple[str, ...], start: float, end: float
) -> dict[str, list[tuple[float, float]]]:
    """Raw (ts, value) points in [start, end) of the topology's series whose names start with one of
    ``prefixes`` (e.g. ``("role.", "link.")``), oldest first: every collection interval as stored."""
    query = Series.objects.filter(topology_id=topology_id)
    names = {
        sid: name
        for sid, name in query.values_list("id", "name")
        if any(name.startswith(prefix) for prefix in prefixes)
    }
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in names.values()}
    rows = Point.objects.filter(
        series_id__in=list(names),
        ts__gte=datetime.fromtimestamp(start, tz=UTC),
        ts__lt=datetime.fromtimestamp(end, tz=UTC),
    ).order_by("ts")
    for sid, ts, value in rows.values_list("series_id", "ts", "value").iterator(chunk_size=5000):
        out[names[sid]].append((ts.timestamp(), value))
    return out
