"""What a collection reads about KV links besides the pods' metrics: the pairs Tandem probes this
interval, and the pods' recent log lines through the Kubernetes API (``kube.pod_log_lines``, in
parallel, each with a short deadline). ``telemetry.services`` calls this; ``telemetry.assemble``
derives from what it returns.

A probe is a real request through a pair, so it takes as long as the engines take (tens to hundreds
of milliseconds on a busy real engine). The metrics never wait for it: a collection sends its probes
after its snapshot went out (``ProbePlan.send``), and the next collection takes the ones that ended
(kept in Redis by ``telemetry.cache``, so whichever worker process runs it sees them). A link's probe
is therefore one interval older than its metrics, and its age is shown with it; a probe never
competes with the scrape of the engine it goes through."""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import redis

import kube
from telemetry import cache
from telemetry.assemble import PodTarget
from telemetry.links import engine_view, pairs_of
from telemetry.probe import ProbeResult, ProbeTarget, choose
from telemetry.scrape import scraper
from telemetry.sources import DIRECT, Transport
from topologies.models import Topology

LOG_TAIL_LINES = 300
MAX_LOG_READS = 32  # pods whose logs are read per interval; more pods are read in turns
_log_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="telemetry-logs")
LogRead = tuple[list[str] | None, str | None]


def probe_targets(
    topology: Topology, targets: list[PodTarget], turn: int, transport: Transport = DIRECT
) -> list[ProbeTarget]:
    """The pairs Tandem probes this interval (engines that speak vLLM's P/D protocol only), each pod
    reached over ``transport`` (directly, or through the API server's pods proxy)."""
    if not engine_view(topology.engine, topology.kv_connector).probed:
        return []
    ready = {t.name: t for t in targets if t.ready and t.ip and t.phase == "Running"}
    pairs = pairs_of(
        [(t.name, t.ip, t.group) for t in ready.values() if t.role == "prefill"],
        [(t.name, t.ip, t.group) for t in ready.values() if t.role == "decode"],
    )
    chosen = choose([(p.prefill, p.decode) for p in pairs], turn)
    return [
        ProbeTarget(
            prefill=prefill,
            decode=decode,
            prefill_url=transport.url(ready[prefill], "").rstrip("/"),
            decode_url=transport.url(ready[decode], "").rstrip("/"),
            model=topology.model_name,
        )
        for prefill, decode in chosen
    ]


@dataclass(frozen=True)
class ProbePlan:
    """The probes a collection sends once its snapshot is out (``send``); the next collection takes
    their results (``probes_done``)."""

    topology_id: int
    targets: list[ProbeTarget]
    timeout_s: float
    transport: Transport

    def send(self) -> Future[list[ProbeResult]] | None:
        future = scraper().probe(
            str(self.topology_id), self.targets, timeout_s=self.timeout_s, transport=self.transport
        )
        if future is not None:
            topology_id = self.topology_id

            def keep(done: Future[list[ProbeResult]]) -> None:
                if not done.cancelled() and done.exception() is None:
                    # off the scraping loop's thread: a Redis write must never hold up a scrape
                    _log_pool.submit(cache.put_probe_results, topology_id, done.result())

            future.add_done_callback(keep)
        return future


def probes_done(topology_id: int) -> list[ProbeResult]:
    """The latest probe of each pair that has ended (sent by earlier collections), oldest first; none
    when Redis does not answer (the links then say their probe is old or missing)."""
    try:
        return cache.probe_results(topology_id)
    except redis.RedisError:
        return []


def log_readers(pods: list[PodTarget], turn: int) -> list[PodTarget]:
    """The pods whose logs are read this interval: all of them, or ``MAX_LOG_READS`` in turns (one
    ``pods/log`` GET per pod per interval is the API server's cost of per-link log lines)."""
    if len(pods) <= MAX_LOG_READS:
        return pods
    start = (turn * MAX_LOG_READS) % len(pods)
    return [pods[(start + i) % len(pods)] for i in range(MAX_LOG_READS)]


def _read_log(
    conn: kube.ClusterConnection, namespace: str, pod: str, container: str | None, interval: float
) -> LogRead:
    """Recent log lines of one pod through the API server (``pods/log``), or why not."""
    try:
        lines = kube.pod_log_lines(
            conn,
            namespace,
            pod,
            tail_lines=LOG_TAIL_LINES,
            since_seconds=max(2, math.ceil(interval * 3)),
            container=container,
            timeout_s=max(0.5, 0.4 * interval),
        )
        return lines, None
    except kube.KubeError as exc:
        return None, exc.message
    except (OSError, ValueError) as exc:
        return None, str(exc)


def read_logs_async(
    conn: kube.ClusterConnection, namespace: str, pods: list[PodTarget], turn: int, interval: float
) -> dict[str, Future[LogRead]]:
    """Start reading this interval's pod logs (they run while the pods are scraped and probed)."""
    return {
        pod.name: _log_pool.submit(_read_log, conn, namespace, pod.name, pod.container, interval)
        for pod in log_readers(pods, turn)
    }


def gather_logs(
    reads: dict[str, Future[LogRead]], interval: float
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(pod -> lines, pod -> why its log could not be read)."""
    logs: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    for name, future in reads.items():
        lines, error = future.result(timeout=interval + 5)
        if lines is not None:
            logs[name] = lines
        elif error:
            errors[name] = error
    return logs, errors
