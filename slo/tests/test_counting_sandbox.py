"""Against the sandbox: a real collection of a deployed P/D topology counts the engines' requests
against its SLOs (the telemetry signal, the decode pods' TTFT histogram and the status counters)."""

from __future__ import annotations

import pytest
import requests

from slo import services
from slo.models import SliMinute
from telemetry.testing import collect_intervals, deploy_ready, undeploy


@pytest.fixture
def deployed(sandbox_cluster, db, operator):  # type: ignore[no-untyped-def]
    ready = deploy_ready(sandbox_cluster, operator, prefix="slo")
    yield ready.topology, ready.of_role("decode")
    undeploy(sandbox_cluster, ready.namespace)


def test_a_collection_counts_the_engines_requests_against_the_slos(deployed, operator) -> None:
    topology, decodes = deployed
    ttft, _, success = sorted(
        services.slo_create_defaults(topology=topology, actor=operator), key=lambda s: s.sli
    )
    collect_intervals(topology.pk, 1)  # the first sample of each pod: no increments yet
    decode = decodes[0]
    url = f"http://{decode.ip}:{decode.container_ports[0] if decode.container_ports else 8000}/v1/completions"
    for _ in range(3):
        body = {"model": topology.model_name, "prompt": "hello", "max_tokens": 4, "stream": True}
        assert requests.post(url, json=body, timeout=30).status_code == 200
    collect_intervals(topology.pk, 1)
    counted = {row.slo_id: row for row in SliMinute.objects.filter(slo__topology=topology)}
    assert counted[success.pk].total >= 3 and counted[success.pk].good == counted[success.pk].total
    assert counted[ttft.pk].total >= 3 and 0 <= counted[ttft.pk].good <= counted[ttft.pk].total
