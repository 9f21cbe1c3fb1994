"""A KV-link fault under the Prometheus metrics source, on a remote-like cluster (pod IPs unreachable,
RBAC enforced with the shipped rules): Prometheus serves the engines' metrics, the engines' logs come
through the API server, traffic reaches the router's LoadBalancer address. The faulty link turns red
and is explained within two collection intervals, from the sources that can see it (the connector's
failure counters and the decode pod's log lines), never from a probe (none runs on this source)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import requests

import kube
from clusters.selectors import cluster_connection
from clusters.services import cluster_register
from deployments.tests.sandbox_helpers import deploy_now
from kube.labels import KTHENA_ROLE, ROLE, TOPOLOGY
from telemetry import services
from telemetry.tests.test_remote_cluster_sandbox import _least_privilege_token, _link, _pod_fault

pytestmark = [pytest.mark.django_db(transaction=True)]

INTERVAL_S = 1.0  # the collection interval this test keeps (Prometheus scrapes every second)


@pytest.fixture
def fast_deploys(settings):
    settings.DEPLOY_POLL_SECONDS = 0.2
    settings.DEPLOY_FAIL_FAST_SECONDS = 2
    settings.DEPLOY_READY_TIMEOUT_SECONDS = 60


class Traffic:
    """Steady completions through the router's external address, as real clients send them."""

    def __init__(self, url: str, model: str) -> None:
        self.url, self.model = url, model
        self.stop = threading.Event()
        self.answers: list[int] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with requests.Session() as session:
            while not self.stop.is_set():
                try:
                    answer = session.post(
                        f"{self.url}/v1/completions",
                        json={"model": self.model, "prompt": "tell me " * 60, "max_tokens": 4},
                        timeout=30,
                    )
                    self.answers.append(answer.status_code)
                except requests.RequestException:
                    self.answers.append(0)
                self.stop.wait(0.05)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=35)


def _collect_every_interval(topology, n: int):
    out = []
    for _ in range(n):
        started = time.monotonic()
        snapshot = services.telemetry_collect(topology_id=topology.pk)
        assert snapshot is not None
        out.append(snapshot)
        time.sleep(max(0.0, INTERVAL_S - (time.monotonic() - started)))
    return out


@pytest.mark.usefixtures("fast_deploys")
def test_link_fault_is_red_and_explained_within_two_intervals_under_the_prometheus_source(
    sandbox_cluster_isolated, prometheus_isolated, operator
):
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    sandbox = sandbox_cluster_isolated
    cluster = cluster_register(
        name=f"prom-{uuid.uuid4().hex[:6]}",
        server=sandbox.server,
        token=_least_privilege_token(sandbox),
        metrics_source="prometheus",
        prometheus_url=prometheus_isolated.url,
    )
    namespace = f"pl{uuid.uuid4().hex[:8]}"
    # The plain backend: its router Service is a LoadBalancer, the address clients (and the gateway) use.
    spec = preset_spec("deepseek-ascend-mooncake", namespace=namespace, backend="deployments")
    topology = topology_create(cluster=cluster, spec=spec, actor=operator)
    try:
        deployment = deploy_now(topology, operator)
        assert deployment.state == "succeeded", (deployment.error, deployment.diagnosis)
        pods = kube.list_pods(cluster_connection(cluster), namespace, f"{TOPOLOGY}={topology.pk}")
        role = {p.name: p.labels.get(KTHENA_ROLE) or p.labels.get(ROLE) for p in pods}
        prefill = next(p for p in pods if role[p.name] == "prefill")
        decode = next(p for p in pods if role[p.name] == "decode")
        from gateway.discovery import discover

        found = discover(topology, cluster_connection(cluster), until=time.monotonic() + 10)
        endpoint = found.url  # the router Service's LoadBalancer address
        assert found.answered and endpoint, f"the router Service has no external address ({found.reason})"
        with Traffic(endpoint, topology.model_name) as traffic:
            # Healthy first: Prometheus has the pods and the link carries transfers.
            deadline = time.monotonic() + 45
            link = None
            while time.monotonic() < deadline:
                (snapshot,) = _collect_every_interval(topology, 1)
                link = _link(snapshot, prefill.name, decode.name) if snapshot["links"] else None
                if link is not None and link["state"] == "up":
                    break
            assert link is not None and link["state"] == "up", (link, snapshot["health"])
            assert "probe" not in {s["kind"] for s in link["sources"]}, link["sources"]

            _pod_fault(sandbox, decode, {"kind": "link_down", "peer": prefill.name})
            try:
                faulted = time.monotonic()
                # Collections at the fault, one and two intervals later. The engine reports a failure only
                # after its own KV timeout (1 s here) and Prometheus adds up to a scrape interval.
                snapshots = _collect_every_interval(topology, 3)
                seen = [_link(s, prefill.name, decode.name) for s in snapshots]
                blind = 0
                if seen[-1]["state"] == "unknown":
                    # A blind interval (no sample from Prometheus in it: its scrape came late) says nothing
                    # of the link; the bound moves by that interval, and the next collection must be red.
                    blind = 1
                    snapshots += _collect_every_interval(topology, 1)
                    seen.append(_link(snapshots[-1], prefill.name, decode.name))
                red = seen[-1]
                assert red["state"] == "down", seen
                assert red["reason"] and "failed KV transfers" in red["reason"], red
                assert {s["kind"] for s in red["sources"]} <= {"metrics", "log"}, red["sources"]
                assert any(prefill.name in r or decode.name in r for r in snapshots[-1]["health"]["reasons"])
                assert (
                    time.monotonic() - faulted <= (3 + blind) * INTERVAL_S + 2.0
                )  # the third collection (+ their own time)
            finally:
                _pod_fault(sandbox, decode, None, method="DELETE")
        assert traffic.answers and all(code == 200 for code in traffic.answers), traffic.answers[-20:]
    finally:
        sandbox.kubectl("delete", "namespace", namespace, "--wait=false")
