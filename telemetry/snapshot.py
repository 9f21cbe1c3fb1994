"""The telemetry data contract: what one collection of a topology produces.

A ``TopologySnapshot`` is built once per collection interval (``telemetry.tasks.collect_topology``),
kept as the latest value in Redis (``telemetry.cache``), pushed to the topology's websocket group as
``{"kind": "telemetry", "snapshot": TopologySnapshot}`` and served by
``GET /api/v1/topologies/{id}/metrics/latest/``. Everything in it is JSON-safe.

Units and conventions (the same everywhere, also in the stored series of ``telemetry.series``):

- ``ts`` is a unix timestamp in seconds (float); ``interval_s`` the seconds the rates cover.
- Derived values carry five significant digits.
- Latency quantiles ``ttft_*`` and ``tbt_*`` are in SECONDS, estimated from the histogram bucket
  increments of this interval (linear interpolation inside a bucket). ``None`` when no request
  finished in the interval — "no data", never zero.
- Link transfer quantiles are in MILLISECONDS (``xfer_p50_ms``, ``xfer_p95_ms``).
- ``hit_rate`` / ``external_hit_rate``: Δhits / Δqueries in tokens over the interval, 0..1; ``None``
  when there were no queries. MindIE and SGLang expose a hit-rate gauge instead; it is used as is.
  ``totals.hit_rate_30s`` is the same over the last 30 s (Σ Δhits / Σ Δqueries): the figure pages
  show, stable from one update to the next; the per-interval value is what the chart plots.
- TBT (time between tokens) is one name for what vLLM and SGLang export as inter-token latency
  (``*:inter_token_latency_seconds``) and what the SLO's ``tbt_ms`` target is compared with.
- ``prompt_tps`` / ``gen_tps``: prompt and generated tokens per second.
- ``running`` / ``waiting``: requests in the running batch / queued (gauges, summed over pods).
- ``kv_usage``: KV-cache usage 0..1 (mean over pods for a role or the topology).
- ``requests_ps``: answered requests per second; ``success_rate`` = served (2xx) / answered,
  ``error_rate`` = failed by the engine (5xx, 429, aborted, errored) / answered, ``client_error_rate`` =
  refused as the client's (4xx other than 429: a prompt over the context, a bad parameter) / answered
  (0..1, the three add up to 1); ``None`` when nothing was answered. Real vLLM counts statuses by class
  (``4xx``), so a 429 of its own would be among its client errors.
- ``slo.ttft_ms`` / ``slo.tbt_ms`` are the TARGETS (ms, ``None`` when the topology sets none);
  ``slo.ttft_p95_ms`` / ``slo.tbt_p95_ms`` the observed p95s they are compared with.
- ``health.state``: ``healthy`` | ``degraded`` (something needs attention: a pod not Ready, a scrape
  failing, a link slow or down, the SLO violated) | ``down`` (no pod serves, or every KV link is down)
  | ``stale`` (no fresh data: the last snapshot is older than three intervals; set by readers)
  | ``unknown`` (no pods found yet). ``reasons`` are whole sentences for an operator.
- ``events`` lists recent events (last 15 minutes, newest last, at most 20) so a freshly loaded page
  can draw markers; the history API returns the events of any window.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

HealthState = Literal["healthy", "degraded", "down", "stale", "unknown"]
SloState = Literal["ok", "violated", "unknown"]
LinkState = Literal["up", "degraded", "down", "unknown"]
LinkSourceKind = Literal["probe", "metrics", "log"]
EventKind = Literal["deploy", "role_change", "alert_raised", "alert_resolved"]
Role = Literal["prefill", "decode", "both"]

HEALTH_STATES: tuple[str, ...] = ("healthy", "degraded", "down", "stale", "unknown")
SLO_STATES: tuple[str, ...] = ("ok", "violated", "unknown")
LINK_STATES: tuple[str, ...] = ("up", "degraded", "down", "unknown")
EVENT_KINDS: tuple[str, ...] = ("deploy", "role_change", "alert_raised", "alert_resolved")


class Health(TypedDict):
    state: HealthState
    reasons: list[str]
    # Silent data-path problems (telemetry.datapath.Problem as a dict: key, name, detail, cost, check,
    # pods); their sentences are among ``reasons`` too. Absent from snapshots made before they existed.
    problems: NotRequired[list[dict[str, object]]]


class Slo(TypedDict):
    ttft_ms: float | None  # target
    tbt_ms: float | None  # target
    ttft_p95_ms: float | None  # observed
    tbt_p95_ms: float | None  # observed
    state: SloState


class Metrics(TypedDict):
    """Derived values shared by pods, roles and the topology (see the module docstring for units)."""

    hit_rate: float | None
    external_hit_rate: float | None
    ttft_p50: float | None
    ttft_p95: float | None
    ttft_p99: float | None
    tbt_p50: float | None
    tbt_p95: float | None
    tbt_p99: float | None
    ttft_mean: float | None  # Δsum / Δcount of the histogram: exact, unlike the quantiles read off buckets
    tbt_mean: float | None
    prompt_tps: float | None
    gen_tps: float | None
    running: float | None
    waiting: float | None
    kv_usage: float | None
    requests_ps: float | None
    success_rate: float | None
    error_rate: float | None
    client_error_rate: float | None


class PodSample(Metrics):
    name: str
    role: str  # prefill | decode | both | router
    ip: str
    ready: bool
    phase: str  # Kubernetes pod phase: Pending | Running | ...
    engine: str  # vllm | sglang | mindie | unknown
    stale: bool  # this pod could not be scraped in this interval (values are from no sample)
    error: str | None  # why the scrape failed, in words
    restarted: bool  # a counter went down: the engine restarted, deltas restart from its new values


class RoleSample(Metrics):
    pods: int
    ready: int


class Totals(Metrics):
    hit_rate_30s: float | None  # Σ Δhits / Σ Δqueries over the last 30 s (the number people read)
    pods: int
    ready: int
    links_up: int
    links_degraded: int
    links_unknown: int  # links nothing that can see them reported on in this interval
    links_down: int


class LinkSource(TypedDict):
    """One interface a link's state was read from, what it said, and when (freshness)."""

    kind: LinkSourceKind  # probe (Tandem's request through the pair) | metrics (connector) | log (engine)
    detail: str  # what it said, in words
    ts: float | None  # when it was observed (unix s)


class LinkSample(TypedDict):
    prefill: str  # prefill pod name
    decode: str  # decode pod name
    state: LinkState  # unknown: nothing that can see this pair said anything in this interval
    status_code: str | None  # an LLM-DataDist status code when an engine logged one
    xfer_p50_ms: float | None  # KV transfer time of the decode pod's connector (see ``shared``), from
    xfer_p95_ms: float | None  # its histogram's bucket increments (interpolated inside a bucket)
    xfer_mean_ms: float | None  # Δsum / Δcount of the same histogram: the exact mean transfer time
    bytes_per_s: float | None
    transfers: int  # transfers the decode pod's connector completed in this interval
    failed: int  # failed transfers in this interval (the pair's own, or the decode pod's when shared)
    reason: str | None  # why it is degraded, down or unknown, in words
    probe_ms: float | None  # the last probe's decode answer time (KV pull + one token), ms
    shared: bool  # transfer figures are the decode pod's, shared by its links (no peer label exists)
    sources: list[LinkSource]
    observed_at: float | None  # the newest observation of any source
    blind: list[str]  # what the engine/connector cannot show about this link, in words


class Event(TypedDict):
    ts: float
    kind: EventKind
    text: str


class RouterReading(TypedDict):
    """The Kthena router's share of one interval (``telemetry.router``; None: not known this interval)."""

    service: str  # namespace/name of the metrics Service read
    replicas: int  # replicas read
    match_attempts: float | None  # prefix-cache match attempts for the topology's model
    match_misses: float | None  # of them, misses (ratio 0)
    error: str | None  # why (some of) it could not be read


class TopologySnapshot(TypedDict):
    topology_id: int
    ts: float
    interval_s: float
    health: Health
    slo: Slo
    totals: Totals
    roles: dict[str, RoleSample]  # "prefill", "decode" (and "both" for aggregated pods)
    pods: list[PodSample]
    links: list[LinkSample]
    events: list[Event]
    router: NotRequired[RouterReading]  # Kthena topologies only


class TelemetryMessage(TypedDict):
    """Sent to ``controlplane.broadcast.topology_group(id)`` after every collection."""

    kind: Literal["telemetry"]
    snapshot: TopologySnapshot


class OverviewMessage(TypedDict):
    """Sent to ``controlplane.broadcast.overview_group()`` after every collection."""

    kind: Literal["overview"]
    topology_id: int
    health: Health
    slo: Slo
    hit_rate: float | None  # over the last 30 s when known (``Totals.hit_rate_30s``)
    ttft_p95: float | None  # seconds
    tbt_p95: float | None  # seconds
    gen_tps: float | None  # generated tokens per second
    pods: int
    ready: int
    links_down: int


METRIC_FIELDS: tuple[str, ...] = tuple(Metrics.__annotations__)


def empty_metrics() -> Metrics:
    return Metrics(
        hit_rate=None,
        external_hit_rate=None,
        ttft_p50=None,
        ttft_p95=None,
        ttft_p99=None,
        tbt_p50=None,
        tbt_p95=None,
        tbt_p99=None,
        ttft_mean=None,
        tbt_mean=None,
        prompt_tps=None,
        gen_tps=None,
        running=None,
        waiting=None,
        kv_usage=None,
        requests_ps=None,
        success_rate=None,
        error_rate=None,
        client_error_rate=None,
    )


def empty_snapshot(topology_id: int, ts: float, interval_s: float, reason: str) -> TopologySnapshot:
    """A snapshot with no data (no pods yet, or the cluster could not be asked)."""
    totals = Totals(
        **empty_metrics(),
        hit_rate_30s=None,
        pods=0,
        ready=0,
        links_up=0,
        links_degraded=0,
        links_down=0,
        links_unknown=0,
    )
    return TopologySnapshot(
        topology_id=topology_id,
        ts=ts,
        interval_s=interval_s,
        health=Health(state="unknown", reasons=[reason]),
        slo=Slo(ttft_ms=None, tbt_ms=None, ttft_p95_ms=None, tbt_p95_ms=None, state="unknown"),
        totals=totals,
        roles={},
        pods=[],
        links=[],
        events=[],
    )
