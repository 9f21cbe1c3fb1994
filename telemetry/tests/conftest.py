"""Fixtures for telemetry tests: a topology, and snapshots built the way a collection builds them."""

from __future__ import annotations

import pytest
from django.core.cache import cache


def _forget_telemetry_keys() -> None:
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    keys = list(client.scan_iter(match="*telemetry:*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.fixture(autouse=True)
def clean_telemetry_cache():
    """Latest snapshots and collector state live in Redis: start and end every test without them."""
    _forget_telemetry_keys()
    yield
    _forget_telemetry_keys()


@pytest.fixture
def cluster(db):
    from clusters.models import Cluster

    return Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")


@pytest.fixture
def topology(db, cluster, admin_user):
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    return topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)


@pytest.fixture
def build():
    """build(ts, ttft=[...cumulative buckets...], link_status=...) -> (snapshot, state, actions).

    ``link_status`` "LLM_SUCCESS": Tandem's probe through prefill-0 → decode-0 answered; anything else:
    the probe's decode step never answered (a dead link)."""
    from telemetry.assemble import LinkInputs, PodResult, PodTarget, build_snapshot, empty_state
    from telemetry.links import engine_view
    from telemetry.parse import parse_metrics
    from telemetry.tests.exposition import vllm_text

    state = {"value": empty_state()}

    def make(
        topology_id, ts, *, ttft=None, queries=1000, hits=600, link_status="LLM_SUCCESS", open_alerts=()
    ):
        raw_p = parse_metrics(vllm_text(queries=queries, hits=hits), ts=ts)
        raw_d = parse_metrics(vllm_text(ttft=ttft), ts=ts)
        ok = link_status == "LLM_SUCCESS"
        probe = probe_result("prefill-0", "decode-0", ts=ts, ok=ok, error=None if ok else "no answer")
        inputs = LinkInputs(view=engine_view("vllm-ascend", "mooncake"), probes=[probe])
        results = [
            PodResult(
                target=PodTarget("prefill-0", "prefill", "127.0.0.10", 8000, True, "Running"), raw=raw_p
            ),
            PodResult(
                target=PodTarget("decode-0", "decode", "127.0.0.11", 8000, True, "Running"),
                raw=raw_d,
            ),
        ]
        snapshot, new_state, actions = build_snapshot(
            topology_id=topology_id,
            ts=ts,
            interval_s=2.0,
            results=results,
            state=state["value"],
            slo_ttft_ms=500.0,
            slo_tbt_ms=None,
            open_alerts=set(open_alerts),
            alert_intervals=3,
            link_slow_ms=250.0,
            events=[],
            link_inputs=inputs,
        )
        state["value"] = new_state
        return snapshot, new_state, actions

    return make


def probe_result(prefill, decode, *, ts, ok=True, status=None, error=None, ms=12.0, request_id=None):
    """A ProbeResult as ``telemetry.probe.probe_pair`` returns it."""
    from telemetry.probe import ProbeResult

    return ProbeResult(
        prefill=prefill,
        decode=decode,
        ok=ok,
        stage=None if ok else "decode",
        status=200 if ok else status,
        error=error,
        ms=ms if ok else None,
        request_id=request_id or f"tandem-probe-{prefill}-{decode}-{ts}",
        ts=ts,
    )


def _make_topology_for_gateway(actor):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="gw-lab", auth_method="token", server="http://127.0.0.1:9")
    return topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=actor)
