"""End to end against the sandbox: telemetry reads the Kthena router's own match-ratio histogram where
Kthena's chart exposes it (the Endpoints of kthena-system/kthena-router-metrics), and the hit-rate
breakdown takes routed warm from it, saying so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import requests

from gateway.prefixgroup import prefix_group
from gateway.recorder import RequestRecord, _insert
from telemetry.testing import collect_intervals
from telemetry.tests.test_collect_sandbox import deployed, router_url  # noqa: F401 - the fixture
from workload.selectors import hit_rate_breakdown
from workload.views import panel_context

TOPICS = 6
REPEATS = 4


def _prompt(topic: int) -> str:
    return f"topic{topic} " + " ".join(f"w{topic}-{i}" for i in range(60))


def test_routed_warm_comes_from_the_routers_own_metric(deployed):  # noqa: F811
    topology, conn, namespace = deployed
    url = router_url(conn, namespace)
    first = collect_intervals(topology.pk, 1)[0]
    assert first["router"]["service"] == "kthena-system/kthena-router-metrics"
    assert first["router"]["replicas"] >= 1 and first["router"]["error"] is None, first["router"]

    order = [topic for _ in range(REPEATS) for topic in range(TOPICS)]  # every topic, then again
    for topic in order:
        body = {"model": topology.model_name, "prompt": _prompt(topic), "max_tokens": 2}
        answer = requests.post(f"{url}/v1/completions", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
    second = collect_intervals(topology.pk, 1)[0]
    reading = second["router"]
    # each topic's first request found nothing; its repeats found their blocks on the pod that served it
    assert (reading["match_attempts"], reading["match_misses"]) == (len(order), TOPICS), reading

    start = datetime.now(UTC) - timedelta(minutes=5)
    _insert(
        [
            RequestRecord(
                created=start + timedelta(seconds=i), key_id=None, model=topology.model_name,
                topology_id=topology.pk, endpoint="completions", backend="cluster", status=200,
                error_code="", stream=False, prompt_tokens=70, completion_tokens=2, ttft_ms=20.0,
                latency_ms=40.0, trace_id=f"{i:032x}",
                prefix_group=prefix_group({"model": topology.model_name, "prompt": _prompt(topic)}),
            )
            for i, topic in enumerate(order)
        ]
    )  # fmt: skip
    now = datetime.now(UTC).timestamp()
    found = hit_rate_breakdown(topology_id=topology.pk, start=now - 600, end=now + 1)
    repeats = len(order) - TOPICS
    assert found.requests == len(order) and found.reuse == repeats / len(order)
    assert found.routed_source == "router" and found.routed_warm == 1.0, found
    rows = {label: note for label, _, _, note in panel_context(topology)["rows"]}
    assert "kthena_router_prefix_cache_match_ratio" in rows["Routed warm"]
