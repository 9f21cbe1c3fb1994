"""What a collection reads about KV links besides the pods' metrics: the pairs Tandem probes this
interval, and the pods' recent log lines through the Kubernetes API (``kube.pod_log_lines``, in
parallel, each with a short deadline). ``telemetry.services`` calls this; ``telemetry.assemble``
derives from what it returns."""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor

import kube
from telemetry.assemble import PodTarget
from telemetry.links import engine_view, pairs_of
from telemetry.probe import ProbeTarget, choose
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
