"""Telemetry writes: collect a topology, store its points, raise/resolve SLO alerts, roll up and prune."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, Exists, Max, Min, OuterRef
from django.db.models.functions import TruncMinute
from django.utils import timezone

import kube
from audit.services import audit_record
from controlplane.broadcast import broadcast_on_commit, overview_group, topology_group
from kube.labels import NOT_SERVING, ROLE, serving_role
from telemetry import cache, selectors
from telemetry.assemble import SERVING_ROLES, CollectorState, PodResult, PodTarget, build_snapshot
from telemetry.collect import apply_source_problem, collect_results, remembered_problem, source_problem
from telemetry.derive import request_window
from telemetry.health import SLO_LABELS, SloMetric
from telemetry.models import LatestSnapshot, Point, Rollup, RollupCursor, Series, TelemetryAlert
from telemetry.router import router_read
from telemetry.series import snapshot_points
from telemetry.signals import interval_collected
from telemetry.snapshot import Event, OverviewMessage, TelemetryMessage, TopologySnapshot, empty_snapshot
from telemetry.targets import device_ips, scrape_port, tent_port
from topologies.models import Backend, Topology
from topologies.render.engine import TENT_METRICS_PORT
from topologies.selectors import pod_selector as topology_pod_selector

logger = logging.getLogger(__name__)

RAW_RETENTION = timedelta(hours=24)
ROLLUP_RETENTION = timedelta(days=30)
DEFAULT_PORT = 8000
SKIPPED_ROLES = frozenset({"router"})
GROUP_LABEL = "modelserving.volcano.sh/group-name"
_series_ids: dict[tuple[int, str], int] = {}
_series_epochs: dict[int, int] = {}


def pod_targets(
    pods: Iterable[kube.PodInfo],
    *,
    engine: str = "",
    spec_port: int | None = None,
    kv_connector: str = "",
    tent_metrics_port: int = TENT_METRICS_PORT,
) -> list[PodTarget]:
    """The pods worth scraping: not being deleted, not the router; role from Tandem's serving-role label
    (else its role label or Kthena's); the port per engine (MindIE: its metrics plane) and the NPU
    device IPs the pod's LLM-DataDist links are named by (``telemetry.targets``)."""
    targets = []
    for pod in pods:
        # The role it serves now (an in-place switch relabels it); mid-switch, its template's role.
        role = serving_role(pod.labels)
        if role == NOT_SERVING:
            role = pod.labels.get(ROLE) or ""
        role = role or "both"
        if pod.deletion_pending or role in SKIPPED_ROLES:
            continue
        targets.append(
            PodTarget(
                name=pod.name,
                role=role,
                ip=pod.ip or "",
                port=scrape_port(engine, pod.container_ports, spec_port),
                ready=pod.ready,
                phase=pod.phase,
                detail=pod.reason or None,
                restarts=pod.restarts,
                group=pod.labels.get(GROUP_LABEL, ""),
                container=pod.serving_container,
                devices=device_ips(pod.annotations),
                tent_port=tent_port(engine, kv_connector, pod.container_ports, tent_metrics_port),
            )
        )
    return targets


def _spec_port(spec: object) -> int | None:
    port = spec.get("port") if isinstance(spec, dict) else None
    return port if isinstance(port, int) else None


def _tent_metrics_port(spec: object) -> int:
    """Where the spec put TENT's metrics server (``connector.transfer_metrics_port``), else its default."""
    connector = spec.get("connector") if isinstance(spec, dict) else None
    port = connector.get("transfer_metrics_port") if isinstance(connector, dict) else None
    return port if isinstance(port, int) else TENT_METRICS_PORT


def telemetry_collect(*, topology_id: int) -> TopologySnapshot | None:
    """Scrape, derive, store and push one topology, then send the link probes the next collection
    will read. None when it is gone or not deployed."""
    topology = Topology.objects.select_related("cluster").filter(pk=topology_id).first()
    if topology is None or topology.deployed_revision_id is None:
        return None
    from clusters.selectors import cluster_connection, cluster_metrics_settings

    interval = float(settings.TELEMETRY_INTERVAL_SECONDS)
    now = time.time()
    state = cache.get_state(topology_id)
    source = cluster_metrics_settings(topology.cluster)
    try:
        conn = cluster_connection(topology.cluster)
        pods = kube.list_pods(conn, topology.namespace, topology_pod_selector(topology))
    except (kube.KubeError, OSError, ValueError) as exc:
        message = exc.message if isinstance(exc, kube.KubeError) else str(exc)
        logger.debug("telemetry: topology %s: cannot list pods: %s", topology_id, message)
        snapshot = empty_snapshot(topology_id, now, interval, f"cannot list the pods: {message}")
        snapshot["health"]["state"] = "down"
        telemetry_store(topology=topology, snapshot=snapshot, actions={})
        return snapshot
    results, link_inputs, probes = collect_results(
        settings=source,
        conn=conn,
        topology=topology,
        targets=pod_targets(
            pods,
            engine=topology.engine,
            spec_port=_spec_port(topology.spec),
            kv_connector=topology.kv_connector,
            tent_metrics_port=_tent_metrics_port(topology.spec),
        ),
        state=dict(state),
        now=now,
        interval=interval,
    )
    problem = remembered_problem(topology_id, *source_problem(source.source, results))
    open_alerts = {
        a.metric: a for a in TelemetryAlert.objects.filter(topology=topology, resolved__isnull=True)
    }
    snapshot, new_state, actions = build_snapshot(
        topology_id=topology_id,
        ts=now,
        interval_s=interval,
        results=results,
        state=state,
        slo_ttft_ms=float(topology.slo_ttft_ms) if topology.slo_ttft_ms else None,
        slo_tbt_ms=float(topology.slo_tbt_ms) if topology.slo_tbt_ms else None,
        open_alerts=set(open_alerts),
        alert_intervals=settings.TELEMETRY_ALERT_INTERVALS,
        link_slow_ms=settings.TELEMETRY_LINK_SLOW_MS,
        events=selectors.recent_events(topology_id=topology_id, since=now - 15 * 60),
        link_inputs=link_inputs,
    )
    apply_source_problem(snapshot, problem)
    if topology.backend == Backend.KTHENA:
        snapshot["router"] = router_read(
            source=source,
            conn=conn,
            topology_id=topology_id,
            model=topology.model_name,
            timeout_s=float(getattr(settings, "TELEMETRY_SCRAPE_TIMEOUT_SECONDS", 0.8 * interval)),
        )
    _apply_gateway(snapshot, topology_id, now)
    cache.set_state(topology_id, new_state)
    telemetry_store(topology=topology, snapshot=snapshot, actions=actions, open_alerts=open_alerts)
    _send_interval(topology_id, now, results, state)
    if probes is not None:
        probes.send()  # after the snapshot went out; the next collection takes their results
    return snapshot


def _send_interval(topology_id: int, now: float, results: list[PodResult], state: CollectorState) -> None:
    """Tell the interval's requests (latency histograms, outcomes) to whoever listens (the SLOs)."""
    samples = [
        (r.target.role, r.raw, state["pods"].get(r.target.name))
        for r in results
        if r.raw is not None and r.target.role in SERVING_ROLES
    ]
    requests = request_window(samples)
    for receiver, error in interval_collected.send_robust(
        sender=Topology, topology_id=topology_id, ts=now, requests=requests
    ):
        if isinstance(error, Exception):
            logger.error("telemetry: topology %s: %r: %s", topology_id, receiver, error, exc_info=error)


GATEWAY_WINDOW_SECONDS = 60.0


def _apply_gateway(snapshot: TopologySnapshot, topology_id: int, now: float) -> None:
    """Errors seen where they happen: the gateway's own records of the last minute."""
    from datetime import UTC, datetime

    from gateway.selectors import recent_outcomes
    from telemetry.health import apply_gateway_outcomes

    since = datetime.fromtimestamp(now - GATEWAY_WINDOW_SECONDS, UTC)
    requests, failed, fallback = recent_outcomes(topology_id=topology_id, since=since)
    snapshot["health"] = apply_gateway_outcomes(
        snapshot["health"],
        requests=requests,
        cluster_failed=failed,
        fallback=fallback,
        window_s=GATEWAY_WINDOW_SECONDS,
    )


def _series_map(topology_id: int, names: list[str]) -> dict[str, int]:
    """Series ids by name, creating missing series; remembered per process once committed, and
    forgotten when retention removed series of the topology since (its epoch changed)."""
    epoch = cache.series_epoch(topology_id)
    if _series_epochs.get(topology_id) != epoch:
        for key in [key for key in _series_ids if key[0] == topology_id]:
            del _series_ids[key]
        _series_epochs[topology_id] = epoch
    known = {n: _series_ids[(topology_id, n)] for n in names if (topology_id, n) in _series_ids}
    missing = [n for n in names if n not in known]
    if missing:
        rows = Series.objects.filter(topology_id=topology_id, name__in=missing)
        found = dict(rows.values_list("name", "id"))
        new = [Series(topology_id=topology_id, name=n) for n in missing if n not in found]
        if new:
            Series.objects.bulk_create(new, ignore_conflicts=True)
            found = dict(rows.values_list("name", "id"))
        known.update(found)
        remember = {(topology_id, n): i for n, i in found.items()}
        transaction.on_commit(lambda: _series_ids.update(remember))
    return known


def _append_points(rows: list[tuple[int, float]], when: datetime) -> None:
    """Append one collection's points in one statement, without model instances (this runs every
    interval for every series). A point that already exists (a repeated collection of the same
    instant) is left alone."""
    table = connection.ops.quote_name(Point._meta.db_table)
    ts = connection.ops.adapt_datetimefield_value(when)
    # the table name comes from the model; every value is a query parameter
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {table} (series_id, ts, value) "  # noqa: S608
                "SELECT s, %s::timestamptz, v FROM unnest(%s::bigint[], %s::double precision[]) AS u(s, v) "
                "ON CONFLICT DO NOTHING",
                [ts, [series_id for series_id, _ in rows], [value for _, value in rows]],
            )
        else:
            cursor.executemany(
                f"INSERT INTO {table} (series_id, ts, value) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",  # noqa: S608
                [(series_id, ts, value) for series_id, value in rows],
            )


@transaction.atomic
def telemetry_store(
    *,
    topology: Topology,
    snapshot: TopologySnapshot,
    actions: dict[SloMetric, str],
    open_alerts: dict[str, TelemetryAlert] | None = None,
) -> None:
    """Append the snapshot's points, record SLO alert changes (and audit them), keep the snapshot as
    the latest, and push it to the topology's and the overview's websocket groups after commit."""
    when = datetime.fromtimestamp(snapshot["ts"], tz=UTC)
    points = list(snapshot_points(snapshot))
    if points:
        ids = _series_map(topology.pk, [name for name, _ in points])
        _append_points([(ids[name], value) for name, value in points], when)
    if open_alerts is None:
        open_alerts = {
            a.metric: a for a in TelemetryAlert.objects.filter(topology=topology, resolved__isnull=True)
        }
    for event in _apply_alerts(topology, snapshot, actions, open_alerts, when):
        snapshot["events"].append(event)
    if not LatestSnapshot.objects.filter(topology=topology).update(ts=when, data=snapshot):
        LatestSnapshot.objects.create(topology=topology, ts=when, data=snapshot)
    transaction.on_commit(lambda: cache.set_snapshot(snapshot))
    broadcast_on_commit(
        topology_group(topology.pk), dict(TelemetryMessage(kind="telemetry", snapshot=snapshot))
    )
    summary = OverviewMessage(
        kind="overview",
        topology_id=topology.pk,
        health=snapshot["health"],
        slo=snapshot["slo"],
        hit_rate=selectors.stable_hit_rate(snapshot["totals"]),
        ttft_p95=snapshot["totals"]["ttft_p95"],
        tbt_p95=snapshot["totals"]["tbt_p95"],
        gen_tps=snapshot["totals"]["gen_tps"],
        pods=snapshot["totals"]["pods"],
        ready=snapshot["totals"]["ready"],
        links_down=snapshot["totals"]["links_down"],
    )
    broadcast_on_commit(overview_group(), dict(summary))


def _apply_alerts(
    topology: Topology,
    snapshot: TopologySnapshot,
    actions: dict[SloMetric, str],
    open_alerts: dict[str, TelemetryAlert],
    when: datetime,
) -> list[Event]:
    slo = snapshot["slo"]
    observed = {"ttft": slo["ttft_p95_ms"], "tbt": slo["tbt_p95_ms"]}
    target = {"ttft": slo["ttft_ms"], "tbt": slo["tbt_ms"]}
    events: list[Event] = []
    for metric, alert in open_alerts.items():
        value = observed.get(metric)
        if value is not None and value > alert.peak_ms and actions.get(metric) != "resolve":  # type: ignore[call-overload]
            TelemetryAlert.objects.filter(pk=alert.pk).update(peak_ms=value)
    for metric, action in actions.items():
        label = SLO_LABELS[metric]
        if action == "raise" and metric not in open_alerts:
            value, goal = observed[metric] or 0.0, target[metric] or 0.0
            message = f"{label} p95 {value:.0f} ms is above the {goal:.0f} ms SLO on {topology.name}"
            alert = TelemetryAlert.objects.create(
                topology=topology,
                metric=metric,
                target_ms=goal,
                observed_ms=value,
                peak_ms=value,
                message=message,
                raised=when,
            )
            audit_record(
                action="telemetry.alert_raised",
                target=topology,
                detail={
                    "alert": alert.pk,
                    "metric": metric,
                    "observed_ms": value,
                    "target_ms": goal,
                    "message": message,
                },
            )
            events.append(Event(ts=snapshot["ts"], kind="alert_raised", text=message))
        elif action == "resolve" and metric in open_alerts:
            alert = open_alerts[metric]
            TelemetryAlert.objects.filter(pk=alert.pk).update(resolved=when)
            message = f"{label} p95 back within the {alert.target_ms:.0f} ms SLO on {topology.name}"
            audit_record(
                action="telemetry.alert_resolved",
                target=topology,
                detail={
                    "alert": alert.pk,
                    "metric": metric,
                    "observed_ms": observed[metric],
                    "message": message,
                },
            )
            events.append(Event(ts=snapshot["ts"], kind="alert_resolved", text=message))
    return events


def _floor_minute(value: datetime) -> datetime:
    return value.replace(second=0, microsecond=0)


@transaction.atomic
def telemetry_rollup_and_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Roll complete minutes of raw points into ``Rollup`` rows (re-doing the last minute, so late points
    count), then drop raw points older than 24 h and rollups older than 30 days. Idempotent."""
    now = now or timezone.now()
    end = _floor_minute(now - timedelta(seconds=10))
    cursor = RollupCursor.objects.select_for_update().filter(name="minute").first()
    start = cursor.until - timedelta(minutes=1) if cursor else _floor_minute(now - RAW_RETENTION)
    counts = {"rolled": 0, "points_pruned": 0, "rollups_pruned": 0, "series_removed": 0}
    topology_series: dict[int, list[int]] = {}
    for series_id, topology_id in Series.objects.values_list("id", "topology_id"):
        topology_series.setdefault(topology_id, []).append(series_id)
    for topology_id, ids in topology_series.items():
        if end > start:
            rows = (
                Point.objects.filter(series_id__in=ids, ts__gte=start, ts__lt=end)
                .annotate(minute=TruncMinute("ts"))
                .values("series_id", "minute")
                .annotate(avg=Avg("value"), low=Min("value"), high=Max("value"), n=Count("value"))
            )
            rollups = [
                Rollup(
                    series_id=row["series_id"],
                    ts=row["minute"],
                    avg=row["avg"],
                    min=row["low"],
                    max=row["high"],
                    count=row["n"],
                )
                for row in rows
            ]
            Rollup.objects.bulk_create(
                rollups,
                update_conflicts=True,
                unique_fields=["series_id", "ts"],
                update_fields=["avg", "min", "max", "count"],
            )
            counts["rolled"] += len(rollups)
        counts["points_pruned"] += Point.objects.filter(
            series_id__in=ids, ts__lt=now - RAW_RETENTION
        ).delete()[0]
        counts["rollups_pruned"] += Rollup.objects.filter(
            series_id__in=ids, ts__lt=now - ROLLUP_RETENTION
        ).delete()[0]
        # series with nothing left (a pod or link gone for 30 days) leave the dictionary too
        empty = (
            Series.objects.filter(pk__in=ids)
            .exclude(Exists(Point.objects.filter(series_id=OuterRef("pk"))))
            .exclude(Exists(Rollup.objects.filter(series_id=OuterRef("pk"))))
        )
        removed = empty.delete()[0]
        if removed:
            counts["series_removed"] += removed
            transaction.on_commit(partial(cache.bump_series_epoch, topology_id))
    if end > start:
        RollupCursor.objects.update_or_create(name="minute", defaults={"until": end})
    return counts


def telemetry_forget(*, topology_id: int) -> None:
    """Drop the Redis-held state of a topology (e.g. after it was deleted)."""
    cache.forget(topology_id)
