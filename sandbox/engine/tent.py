"""Mooncake's transfer engine (TENT) metrics, served on its own port as the real one serves them.

Names, help texts, labels and types from kvcache-ai/Mooncake ``mooncake-transfer-engine/tent/include/tent/
metrics/tent_metrics.h`` (ylt dynamic counters, ``transport`` = ``transportTypeName``: rdma, tcp, nvlink,
...; failovers labelled ``from``/``to``); a counter with no series yet prints nothing, as ylt's does.
The port: ``TENT_METRICS_HTTP_PORT`` (default 9100) when ``TENT_METRICS_ENABLED`` is true
(``tent/src/metrics/config_loader.cpp``). The sandbox's transfer engine moves KV over rdma; the
``kv_transport_fallback`` fault moves a transfer to tcp and counts one rdma → tcp failover.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_PORT = 9100
TCP_SLOWDOWN = 4.0  # a transfer over TCP instead of RDMA takes this many times longer
_FAMILIES = (
    ("tent_read_bytes_total", "Total bytes read via TENT", "read_bytes"),
    ("tent_write_bytes_total", "Total bytes written via TENT", "write_bytes"),
    ("tent_read_requests_total", "Total read requests via TENT", "read_requests"),
    ("tent_write_requests_total", "Total write requests via TENT", "write_requests"),
)


def tent_port(env: Mapping[str, str], family: str | None) -> int | None:
    """The port TENT serves /metrics on for this engine, None when it serves none (pure)."""
    if family != "mooncake" or env.get("TENT_METRICS_ENABLED", "").lower() not in ("1", "true", "yes", "on"):
        return None
    raw = env.get("TENT_METRICS_HTTP_PORT", "")
    return int(raw) if raw.isdigit() and 0 < int(raw) < 65536 else DEFAULT_PORT


@dataclass
class TentCounters:
    read_bytes: dict[str, int] = field(default_factory=dict)
    write_bytes: dict[str, int] = field(default_factory=dict)
    read_requests: dict[str, int] = field(default_factory=dict)
    write_requests: dict[str, int] = field(default_factory=dict)
    failover: dict[tuple[str, str], int] = field(default_factory=dict)

    def write(self, transport: str, num_bytes: int) -> None:
        self.write_bytes[transport] = self.write_bytes.get(transport, 0) + num_bytes
        self.write_requests[transport] = self.write_requests.get(transport, 0) + 1

    def fail_over(self, source: str, target: str) -> None:
        self.failover[(source, target)] = self.failover.get((source, target), 0) + 1

    def render(self) -> str:
        """The exposition TENT's ``/metrics`` answers (pure)."""
        lines: list[str] = []
        for name, help_text, attr in _FAMILIES:
            values: dict[str, int] = getattr(self, attr)
            if values:
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
                lines += [f'{name}{{transport="{t}"}} {v}' for t, v in sorted(values.items())]
        if self.failover:
            name = "tent_transport_failover_total"
            lines += [f"# HELP {name} Total cross-transport failover events", f"# TYPE {name} counter"]
            lines += [f'{name}{{from="{a}",to="{b}"}} {v}' for (a, b), v in sorted(self.failover.items())]
        return "\n".join(lines) + "\n" if lines else ""
