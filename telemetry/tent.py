"""Mooncake's transfer engine (TENT) read as part of its pod (PURE).

TENT serves its own ``/metrics`` (kvcache-ai/Mooncake ``tent/src/metrics/config_loader.cpp``:
``TENT_METRICS_HTTP_PORT``, default 9100); the renderer declares that port as ``tent-metrics``
(``topologies.render.engine``). Telemetry reads it beside the engine's port, directly or through the
API server's proxy, and merges its counters into the pod's sample; through Prometheus its series carry
the same ``pod`` label and come with the pod's own query. A pod whose TENT port does not answer is
named ("transfer engine metrics unreachable on :9100 ..."): its ``tent_*`` counters are then absent,
never zero, and the previous ones are kept so the next interval's increments stay right.
"""

from __future__ import annotations

from telemetry.parse import RawSample

PREFIX = "tent_"


def tent_unreachable(port: int, why: str) -> str:
    return f"transfer engine metrics unreachable on :{port} ({why})"


def merge_tent(engine: RawSample, tent: RawSample) -> RawSample:
    """The engine's sample with TENT's counters, gauges and histograms added."""
    return RawSample(
        engine=engine["engine"],
        ts=engine["ts"],
        counters={**engine["counters"], **tent["counters"]},
        gauges={**engine["gauges"], **tent["gauges"]},
        histograms={**engine["histograms"], **tent["histograms"]},
        info={**tent["info"], **engine["info"]},
    )


def has_tent(raw: RawSample | None) -> bool:
    return raw is not None and any(name.startswith(PREFIX) for name in raw["counters"])


def keep_previous_tent(current: RawSample, previous: RawSample | None) -> RawSample:
    """The sample to remember when TENT's port did not answer: the previous TENT counters carried, so
    the next interval's increments are measured from them and not from zero."""
    if previous is None:
        return current
    kept = {k: v for k, v in previous["counters"].items() if k.startswith(PREFIX)}
    return RawSample(**{**current, "counters": {**current["counters"], **kept}})
