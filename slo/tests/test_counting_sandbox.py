"""Against the sandbox: a real collection of a deployed P/D topology counts the engines' requests
against its SLOs (the telemetry signal, the decode pods' TTFT histogram and the status counters)."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

import kube
from kube.labels import TOPOLOGY
from slo import services
from slo.models import SliMinute
from telemetry.testing import collect_intervals


@pytest.fixture
def deployed(sandbox_cluster, db, operator):  # type: ignore[no-untyped-def]
    from clusters.selectors import cluster_connection
    from clusters.services import cluster_register
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = cluster_register(
        name=f"sbx-{uuid.uuid4().hex[:6]}", server=sandbox_cluster.server, token=sandbox_cluster.token
    )
    namespace = f"slo{uuid.uuid4().hex[:8]}"
    topology = topology_create(
        cluster=cluster, spec=preset_spec("deepseek-ascend-mooncake", namespace=namespace), actor=operator
    )
    conn = cluster_connection(cluster)
    kube.apply_objects(conn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
    kube.apply_objects(conn, topology.current_revision.manifests)
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = [p for p in kube.list_pods(conn, namespace, f"{TOPOLOGY}={topology.pk}") if p.ready]
        if {p.labels.get("modelserving.volcano.sh/role") for p in pods} >= {"prefill", "decode"}:
            break
        time.sleep(0.2)
    else:
        pytest.fail("prefill and decode pods not Ready in 60 s")
    yield topology, [p for p in pods if p.labels.get("modelserving.volcano.sh/role") == "decode"]
    sandbox_cluster.kubectl(
        "delete", "modelservings,deployments,services", "--all", "-n", namespace, "--wait=false"
    )


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
