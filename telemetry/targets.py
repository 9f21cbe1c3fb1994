"""Which port of a pod telemetry scrapes, and which NPU device IPs stand for it (PURE).

- MindIE serves ``/metrics`` on its metrics plane (``metricsPort``; MindIE-LLM ``http_server.cpp``
  ``CreateHttpServerPoint``), not on its service port, unless its config puts them on one port. Tandem
  renders ``metricsPort`` two above ``port`` (``topologies.render.engine.mindie_metrics_port``), MindIE's
  own defaults being 1025 / 1026 / 1027; a MindIE pod that declares that port is scraped there.
- vllm-ascend's LLM-DataDist connector names its links by NPU device IP (``pd_comm_<prefill device
  ip>_<decode device ip>``); the Ascend device plugin's annotation lists each pod's device IPs
  (``rebalancing.inplace.ascend_devices`` reads it for MindIE's role assignments as well).
"""

from __future__ import annotations

from rebalancing.inplace import ascend_devices
from topologies.render.engine import TENT_METRICS_PORT, mindie_metrics_port

DEFAULT_PORT = 8000
MINDIE_METRICS_DEFAULT = 1027  # MindIE-LLM src/include/config/config_info.h metricsPort


def scrape_port(engine: str, ports: tuple[int, ...], spec_port: int | None = None) -> int:
    """The port to read ``/metrics`` from: the first declared one, but for MindIE its metrics plane
    when the pod declares it (two above the service port, or MindIE's default 1027)."""
    first = ports[0] if ports else (spec_port or DEFAULT_PORT)
    if engine == "mindie":
        for candidate in (mindie_metrics_port(spec_port or first), MINDIE_METRICS_DEFAULT):
            if candidate in ports:
                return candidate
    return first


def device_ips(annotations: dict[str, str]) -> tuple[str, ...]:
    """The pod's NPU device IPs from the device plugin's annotation (() without NPUs)."""
    return tuple(ip for _, ip in ascend_devices(annotations))


def tent_port(
    engine: str, kv_connector: str, ports: tuple[int, ...], wanted: int = TENT_METRICS_PORT
) -> int | None:
    """The port of Mooncake's transfer engine's own ``/metrics`` (TENT; the renderer declares it as
    ``tent-metrics`` when the spec's ``connector.transfer_metrics`` is on, at its
    ``transfer_metrics_port``, ``wanted``) when the pod's KV travels through it and the pod declares that
    port."""
    if kv_connector != "mooncake" or engine == "mindie" or wanted not in ports:
        return None
    return wanted
