"""Mooncake TENT read as part of its pod: merged, and kept (not zeroed) when its port is silent."""

from __future__ import annotations

from telemetry.datapath import PodWindow, transport_fallback
from telemetry.derive import pod_window
from telemetry.parse import LineParser, RawSample
from telemetry.tent import has_tent, keep_previous_tent, merge_tent

ENGINE = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 1\n'


def tent(rdma: int, tcp: int = 0, failovers: int = 0) -> str:
    lines = [
        "# HELP tent_write_bytes_total Total bytes written via TENT",
        "# TYPE tent_write_bytes_total counter",
    ]
    lines.append(f'tent_write_bytes_total{{transport="rdma"}} {rdma}')
    if tcp:
        lines.append(f'tent_write_bytes_total{{transport="tcp"}} {tcp}')
    if failovers:
        lines += [
            "# HELP tent_transport_failover_total Total cross-transport failover events",
            "# TYPE tent_transport_failover_total counter",
            f'tent_transport_failover_total{{from="rdma",to="tcp"}} {failovers}',
        ]
    return "\n".join(lines) + "\n"


def sample(ts: float, tent_text: str | None) -> RawSample:
    engine = LineParser().parse(ENGINE, ts=ts)
    return engine if tent_text is None else merge_tent(engine, LineParser().parse(tent_text, ts=ts))


def test_a_silent_tent_port_keeps_the_last_counters_so_the_next_interval_is_not_a_spike():
    first = sample(1.0, tent(1000))
    assert has_tent(first) and first["gauges"]["running"] == 1.0 and first["engine"] == "vllm"
    silent = sample(3.0, None)
    assert not has_tent(silent)
    kept = keep_previous_tent(silent, first)
    assert kept["counters"]["tent_bytes_rdma"] == 1000
    back = sample(5.0, tent(1500, tcp=400, failovers=2))
    window, _ = pod_window(back, kept)
    assert window.deltas["tent_bytes_rdma"] == 500 and window.deltas["tent_bytes_tcp"] == 400
    problem = transport_fallback([PodWindow("prefill-0", "prefill", window, None)], 2.0)
    assert problem is not None and "rdma → tcp ×2" in problem["detail"], problem
