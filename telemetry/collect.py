"""Collection through the cluster's metrics source, and the named problem when that source fails.

``collect_results`` reads every scrapeable pod of a topology through the source the cluster chose
(``telemetry.sources``); ``source_problem`` (pure) turns a collection in which no pod could be read
into one sentence naming the source and the fix, which ``apply_source_problem`` puts first in the
topology's health (state ``stale``: nothing fresh is known) so the page never shows an empty panel.
The problem is remembered for a while (``cache``) so intervals in which every pod is in back-off
keep showing it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core.cache import cache

import kube
from clusters.metrics import MetricsSettings
from telemetry import linkinputs
from telemetry.assemble import LinkInputs, PodResult, PodTarget
from telemetry.linkinputs import ProbePlan
from telemetry.links import engine_view
from telemetry.scrape import ScrapeRequest, scraper
from telemetry.snapshot import TopologySnapshot
from telemetry.sources import DIRECT, ApiProxyTransport, PrometheusSource, Transport
from topologies.models import Topology

PROBLEM_TTL = 120
_NAMED = ("metrics source ", "Prometheus at ")


def _problem_key(topology_id: int) -> str:
    return f"telemetry:source-problem:{topology_id}"


def _transport(settings: MetricsSettings, conn: kube.ClusterConnection, namespace: str) -> Transport:
    """How the pods themselves are reached: the proxy source goes through the API server, the others
    directly (Prometheus answers the metrics; link probes still need a way to the pods)."""
    if settings.source == "proxy":
        return ApiProxyTransport(namespace, kube.proxy_transport(conn))
    return DIRECT


def collect_results(
    *,
    settings: MetricsSettings,
    conn: kube.ClusterConnection,
    topology: Topology,
    targets: list[PodTarget],
    state: dict[str, Any],
    now: float,
    interval: float,
) -> tuple[list[PodResult], LinkInputs, ProbePlan | None]:
    """Every scrapeable pod's metrics through the cluster's source, the KV-link inputs (the probes
    through each pair that ended since the last collection, the engines' log lines through pods/log),
    and the probes to send once the snapshot is out (over the same way to the pods; see
    ``telemetry.linkinputs`` for why the metrics never wait for them)."""
    requests, results = [], []
    backoff = state["backoff"]
    for target in targets:
        if not target.ip or target.phase != "Running":
            results.append(PodResult(target=target))
        elif target.name in backoff and backoff[target.name]["retry_at"] > now:
            results.append(PodResult(target=target, skipped=True))
        else:
            requests.append(ScrapeRequest(target=target))
    timeout_s = float(getattr(django_settings, "TELEMETRY_SCRAPE_TIMEOUT_SECONDS", 0.8 * interval))
    namespace = topology.namespace
    transport = _transport(settings, conn, namespace)
    inputs = LinkInputs()
    serving = [t for t in targets if t.role in ("prefill", "decode") and t.phase == "Running"]
    with_links = topology.kv_connector != "none" and bool(serving)
    plan = None
    logs = None
    if with_links:
        inputs.view = engine_view(topology.engine, topology.kv_connector)
        turn = int(state.get("turn") or 0)
        logs = linkinputs.read_logs_async(conn, namespace, serving, turn, interval)
        if settings.source != "prometheus" or transport is not DIRECT:
            probes = linkinputs.probe_targets(topology, targets, turn, transport)
            plan = ProbePlan(topology.pk, probes, timeout_s, transport)
    if settings.source == "prometheus":
        source = PrometheusSource(
            settings.prometheus_url,
            token=settings.prometheus_token,
            username=settings.prometheus_username,
            password=settings.prometheus_password,
        )
        results.extend(scraper().query(source, namespace, [r.target for r in requests], timeout_s=timeout_s))
    else:
        results.extend(scraper().scrape(requests, timeout_s=timeout_s, transport=transport))
    if with_links:
        inputs.probes = linkinputs.probes_done(topology.pk)
    if logs is not None:
        inputs.logs, inputs.log_errors = linkinputs.gather_logs(logs, interval)
    return results, inputs, plan


def source_problem(source: str, results: list[PodResult]) -> tuple[str | None, bool]:
    """(the problem, whether anything was tried): None when some pod was read (pure)."""
    tried = [r for r in results if not r.skipped and (r.raw is not None or r.error is not None)]
    if not tried:
        return None, False
    if any(r.raw is not None for r in tried):
        return None, True
    first = next(r.error for r in tried if r.error)
    assert first is not None
    named = first if first.startswith(_NAMED) else f"metrics source {source}: {first}"
    more = len(tried) - 1
    return (named + (f" (and {more} more pod{'s' if more != 1 else ''})" if more else "")), True


def remembered_problem(topology_id: int, problem: str | None, tried: bool) -> str | None:
    if problem is not None:
        cache.set(_problem_key(topology_id), problem, PROBLEM_TTL)
        return problem
    if tried:
        cache.delete(_problem_key(topology_id))
        return None
    return cache.get(_problem_key(topology_id))


def apply_source_problem(snapshot: TopologySnapshot, problem: str | None) -> TopologySnapshot:
    if problem is None:
        return snapshot
    health = snapshot["health"]
    reasons = [problem, *[r for r in health["reasons"] if r != problem]]
    snapshot["health"] = {"state": "down" if health["state"] == "down" else "stale", "reasons": reasons}
    return snapshot
