from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import reverse

from gateway.models import BreakerEvent, GatewayRequest, ProbeRun, Route
from gateway.routes import Fallback, RouteEntry
from gateway.series import CHART_WINDOWS, GatewaySeries

# Engines that serve OpenAI's Responses API themselves (vLLM since 0.10); others get it translated.
RESPONSES_ENGINES = ("vllm", "vllm-ascend")


def route_entries() -> list[RouteEntry]:
    """Every topology the gateway can dispatch to: deployed ones, and any with a route configured."""
    from django.db.models import Q

    from gateway.reserve import context_from_spec
    from topologies.models import Topology

    topologies = Topology.objects.filter(Q(deployed_revision__isnull=False) | Q(gateway_route__isnull=False))
    entries = []
    for topology in topologies.select_related("gateway_route").order_by("id"):
        route: Route | None = getattr(topology, "gateway_route", None)
        fallback = None
        if route is not None and route.fallback_base_url:
            fallback = Fallback(
                base_url=route.fallback_base_url.rstrip("/"),
                api_key=route.fallback_api_key,
                model=route.fallback_model or topology.model_name,
                on_429=route.fallback_on_429,
            )
        aliases = tuple(route.aliases) if route is not None else ()
        entries.append(
            RouteEntry(
                topology_id=topology.pk,
                topology_name=topology.name,
                model=topology.model_name,
                names=(topology.model_name, *[a for a in aliases if a != topology.model_name]),
                endpoint=((route.endpoint_url or route.discovered_url) if route is not None else "").rstrip(
                    "/"
                ),
                fallback=fallback,
                timeout=float(route.timeout_seconds if route is not None else 60),
                breaker_failures=route.breaker_failures if route is not None else 3,
                breaker_open_seconds=float(route.breaker_open_seconds if route is not None else 15),
                responses_passthrough=topology.engine in RESPONSES_ENGINES,
                context=context_from_spec(topology.spec),
                slo_ttft_ms=topology.slo_ttft_ms,
                slo_tbt_ms=topology.slo_tbt_ms,
            )
        )
    return entries


def recent_requests(*, topology_id: int, limit: int = 200) -> QuerySet[GatewayRequest]:
    return GatewayRequest.objects.filter(topology_id=topology_id, probe=False)[:limit]


def breaker_events(*, topology_id: int, limit: int = 20) -> QuerySet[BreakerEvent]:
    return BreakerEvent.objects.filter(topology_id=topology_id)[:limit]


def probe_runs(*, topology_id: int, limit: int = 20) -> QuerySet[ProbeRun]:
    return ProbeRun.objects.filter(topology_id=topology_id).select_related("requested_by")[:limit]


def topology_gateway_context(topology: Any, request: Any = None) -> dict[str, Any]:
    """Context of the gateway panel on the topology page: where it serves, its breaker, its probes."""
    from datetime import timedelta

    from django.db.models import Count
    from django.utils import timezone

    from gateway.probes import KINDS

    route = Route.objects.filter(topology=topology).first()
    since = timezone.now() - timedelta(minutes=15)
    recent = GatewayRequest.objects.filter(topology=topology, created__gte=since, probe=False)
    by_backend = {row["backend"]: row["n"] for row in recent.values("backend").annotate(n=Count("id"))}
    errors = recent.filter(status__gte=500).count()
    total = sum(by_backend.values())
    last_breaker = BreakerEvent.objects.filter(topology=topology).first()
    runs = list(probe_runs(topology_id=topology.pk, limit=6))
    user = getattr(request, "user", None)
    return {
        "route": route,
        "serving_endpoint": (route.endpoint_url or route.discovered_url) if route else "",
        "model_names": [topology.model_name, *((route.aliases if route else []) or [])],
        "breaker": last_breaker,
        "breaker_events": list(breaker_events(topology_id=topology.pk, limit=5)),
        "requests_15m": total,
        "fallback_15m": by_backend.get("fallback", 0),
        "errors_15m": errors,
        "latest_run": runs[0] if runs else None,
        "runs": runs,
        "probe_kinds": KINDS,
        "can_operate": bool(user is not None and user.is_authenticated and user.has_role("operator")),
        "series_url": reverse("api:topology-gateway-series", kwargs={"pk": topology.pk}),
        "chart_windows": CHART_WINDOWS,
    }


def overview_gateway_rows() -> list[dict[str, Any]]:
    """Topologies whose circuit is not closed or whose traffic went to the fallback in the last 15 min."""
    from datetime import timedelta

    from django.db.models import Count, Q
    from django.utils import timezone

    since = timezone.now() - timedelta(minutes=15)
    fallback = {
        row["topology_id"]: row["n"]
        for row in GatewayRequest.objects.filter(
            created__gte=since, backend="fallback", topology__isnull=False, probe=False
        )
        .values("topology_id")
        .annotate(n=Count("id"))
    }
    latest: dict[int, BreakerEvent] = {}
    for event in BreakerEvent.objects.filter(
        Q(created__gte=since) | Q(state__in=["open", "half_open"])
    ).select_related("topology")[:500]:
        latest.setdefault(event.topology_id, event)
    rows = []
    for topology_id in sorted(
        set(fallback) | {t for t, e in latest.items() if e.state != "closed" or t in fallback}
    ):
        last = latest.get(topology_id)
        if last is None and not fallback.get(topology_id):
            continue
        rows.append(
            {
                "topology_id": topology_id,
                "name": last.topology.name if last else "",
                "state": last.state if last else "closed",
                "reason": last.reason if last else "",
                "changed": last.created if last else None,
                "fallback_15m": fallback.get(topology_id, 0),
            }
        )
    if any(not row["name"] for row in rows):
        from topologies.models import Topology

        names = dict(
            Topology.objects.filter(pk__in=[r["topology_id"] for r in rows]).values_list("pk", "name")
        )
        for row in rows:
            row["name"] = row["name"] or names.get(row["topology_id"], "?")
    return rows


def recent_outcomes(*, topology_id: int, since: Any) -> tuple[int, int, int]:
    """(requests, requests the cluster failed, requests the fallback served) through the gateway."""
    from django.db.models import Count, Q

    failed_codes = ["cluster_unavailable", "all_backends_down", "fallback_rejected_key"]
    counts = GatewayRequest.objects.filter(
        topology_id=topology_id, created__gte=since, probe=False
    ).aggregate(
        total=Count("id"),
        fallback=Count("id", filter=Q(backend="fallback")),
        failed=Count(
            "id",
            filter=Q(backend="fallback")
            | Q(backend="cluster", status__gte=500)
            | Q(error_code__in=failed_codes),
        ),
    )
    return int(counts["total"]), int(counts["failed"]), int(counts["fallback"])


_SERIES_SQL = """
SELECT floor((extract(epoch FROM created) - %(first)s) / %(step)s)::int AS bucket,
       count(*) FILTER (WHERE backend = 'cluster' AND NOT probe),
       count(*) FILTER (WHERE backend = 'fallback' AND NOT probe),
       count(*) FILTER (WHERE backend NOT IN ('cluster', 'fallback') AND NOT probe),
       count(*) FILTER (WHERE probe),
       count(*) FILTER (WHERE status >= 500),
       count(*) FILTER (WHERE status >= 400 AND status < 500),
       percentile_cont(ARRAY[%(q1)s, %(q2)s]::float8[]) WITHIN GROUP (ORDER BY ttft_ms)
           FILTER (WHERE status < 400 AND stream),
       percentile_cont(ARRAY[%(q1)s, %(q2)s]::float8[]) WITHIN GROUP (ORDER BY latency_ms)
           FILTER (WHERE status < 400)
FROM {table}
WHERE {column} = %(owner)s AND created >= %(since)s AND created < %(until)s
GROUP BY 1
ORDER BY 1
"""


def _pair(values: Any) -> tuple[float | None, float | None]:
    if not values:
        return (None, None)
    return (values[0], values[1])


def gateway_series(
    *, start: float, end: float, step: int, topology_id: int | None = None, key_id: str | None = None
) -> GatewaySeries:
    """The gateway's records of one topology (or one key) in ``[start, end)``, in step-aligned buckets.

    One grouped query over the ``(topology, created)`` or ``(key_id, created)`` index; on PostgreSQL
    the quantiles are ``percentile_cont`` in the same query, elsewhere the rows are aggregated here.
    """
    import uuid
    from datetime import UTC, datetime

    from django.db import connection

    from gateway import series

    if (topology_id is None) == (key_id is None):
        raise ValueError("give exactly one of topology_id and key_id")
    first = series.first_bucket(start, step)
    since = datetime.fromtimestamp(first, tz=UTC)
    until = datetime.fromtimestamp(end, tz=UTC)
    owner: dict[str, Any] = {"topology_id": topology_id} if topology_id is not None else {"key_id": key_id}
    records = GatewayRequest.objects.filter(created__gte=since, created__lt=until, **owner)
    rows: list[series.BucketRow]
    if connection.vendor == "postgresql":
        meta = GatewayRequest._meta
        column = "topology_id" if topology_id is not None else "key_id"
        sql = _SERIES_SQL.format(table=connection.ops.quote_name(meta.db_table), column=column)
        params = {
            "first": first,
            "step": step,
            "q1": series.QUANTILES[0],
            "q2": series.QUANTILES[1],
            "owner": topology_id if topology_id is not None else uuid.UUID(str(key_id)),
            "since": since,
            "until": until,
        }
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = [
                series.BucketRow(
                    index=row[0],
                    cluster=row[1],
                    fallback=row[2],
                    none=row[3],
                    verification=row[4],
                    errors=row[5],
                    refused=row[6],
                    ttft=_pair(row[7]),
                    latency=_pair(row[8]),
                )
                for row in cursor.fetchall()
            ]
    else:
        values = records.values_list(*series.RECORD_FIELDS)
        rows = series.aggregate(values.iterator(chunk_size=5000), first=first, step=step)
    result = series.build(rows, first=first, end=end, step=step)
    if topology_id is not None:
        topology_ids = [topology_id]
    else:
        topology_ids = list(
            records.filter(topology__isnull=False).order_by().values_list("topology_id", flat=True).distinct()
        )
    changes = BreakerEvent.objects.filter(
        topology_id__in=topology_ids, created__gte=since, created__lt=until
    ).order_by("created")[:200]
    result["events"] = sorted(
        [
            *result["events"],
            *(series.breaker_marker(e.created.timestamp(), e.state, e.reason) for e in changes),
        ],
        key=lambda m: m["ts"],
    )
    return result
