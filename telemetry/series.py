"""Names of the stored time series, and how a snapshot becomes points.

Every collection stores one point per series below (``None`` values are skipped: "no data" is a gap,
not a zero). Units are those of ``telemetry.snapshot``: latency quantiles in seconds, link transfer
times in milliseconds, rates per second, ratios 0..1.

========================================  ===============================================================
name                                      value
========================================  ===============================================================
``topology.<field>``                      topology-wide value, ``<field>`` in ``TOPOLOGY_FIELDS``
``role.<role>.<field>``                   per role (``prefill``, ``decode``, ``both``), ``ROLE_FIELDS``
``pod.<pod>.<field>``                     per pod, ``POD_FIELDS``
``link.<prefill>.<decode>.<field>``       per KV link, ``LINK_FIELDS``; ``state`` is 0 up, 1 degraded,
                                          2 down
``router.<field>``                        the Kthena router's increments over the interval,
                                          ``ROUTER_FIELDS`` (``telemetry.router``): summed over a window
========================================  ===============================================================

Examples: ``topology.hit_rate``, ``role.prefill.ttft_p95``, ``pod.decode-0.waiting``,
``link.prefill-0.decode-2.xfer_p95_ms``.

``<field>`` for topology and role: ``hit_rate external_hit_rate ttft_p50 ttft_p95 ttft_p99 tbt_p50
tbt_p95 tbt_p99 ttft_mean tbt_mean prompt_tps gen_tps running waiting kv_usage requests_ps success_rate
error_rate client_error_rate``;
the topology adds ``ready`` (Ready pods) and ``links_down``. Pods store the subset in ``POD_FIELDS``
(enough for the per-pod table's sparklines without storing every quantile of every pod).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from telemetry.snapshot import METRIC_FIELDS, TopologySnapshot

ROLE_FIELDS: tuple[str, ...] = METRIC_FIELDS
TOPOLOGY_FIELDS: tuple[str, ...] = (*METRIC_FIELDS, "ready", "links_down")
POD_FIELDS: tuple[str, ...] = (
    "hit_rate",
    "ttft_p95",
    "tbt_p95",
    "prompt_tps",
    "gen_tps",
    "running",
    "waiting",
    "kv_usage",
    "error_rate",
    "client_error_rate",
)
LINK_FIELDS: tuple[str, ...] = (
    "state", "xfer_p50_ms", "xfer_p95_ms", "xfer_mean_ms", "bytes_per_s", "probe_ms", "failed",
)  # fmt: skip
ROUTER_FIELDS: tuple[str, ...] = ("match_attempts", "match_misses")
ROLES: tuple[str, ...] = ("prefill", "decode", "both")
LINK_STATE_VALUE: dict[str, float] = {"up": 0.0, "degraded": 1.0, "down": 2.0}

_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
_SERIES_RE = re.compile(
    r"^(?:topology\.(?P<tfield>\w+)"
    r"|role\.(?P<role>\w+)\.(?P<rfield>\w+)"
    rf"|pod\.(?P<pod>{_NAME})\.(?P<pfield>\w+)"
    rf"|link\.(?P<lp>[-a-z0-9]+)\.(?P<ld>[-a-z0-9]+)\.(?P<lfield>\w+)"
    r"|router\.(?P<xfield>\w+))$"
)


def is_valid_series_name(name: str) -> bool:
    """True when ``name`` follows the scheme above with a known field."""
    match = _SERIES_RE.match(name)
    if match is None:
        return False
    if match["tfield"]:
        return match["tfield"] in TOPOLOGY_FIELDS
    if match["rfield"]:
        return match["role"] in ROLES and match["rfield"] in ROLE_FIELDS
    if match["lfield"]:
        return match["lfield"] in LINK_FIELDS
    if match["xfield"]:
        return match["xfield"] in ROUTER_FIELDS
    return match["pfield"] in POD_FIELDS


def snapshot_points(snapshot: TopologySnapshot) -> Iterator[tuple[str, float]]:
    """Yield (series name, value) for every stored series that has a value in this snapshot."""
    totals = snapshot["totals"]
    for field in TOPOLOGY_FIELDS:
        value = totals.get(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            yield f"topology.{field}", float(value)
    for role, sample in snapshot["roles"].items():
        for field in ROLE_FIELDS:
            value = sample.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield f"role.{role}.{field}", float(value)
    for pod in snapshot["pods"]:
        for field in POD_FIELDS:
            value = pod.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield f"pod.{pod['name']}.{field}", float(value)
    for link in snapshot["links"]:
        prefix = f"link.{link['prefill']}.{link['decode']}"
        if link["state"] in LINK_STATE_VALUE:  # "unknown" is no value (a gap, not a state)
            yield f"{prefix}.state", LINK_STATE_VALUE[link["state"]]
        yield f"{prefix}.failed", float(link["failed"])
        for field in ("xfer_p50_ms", "xfer_p95_ms", "xfer_mean_ms", "bytes_per_s", "probe_ms"):
            value = link.get(field)
            if isinstance(value, (int, float)):
                yield f"{prefix}.{field}", float(value)
    router = snapshot.get("router")
    if router is not None:
        for field in ROUTER_FIELDS:
            value = router.get(field)
            if isinstance(value, (int, float)):
                yield f"router.{field}", float(value)
