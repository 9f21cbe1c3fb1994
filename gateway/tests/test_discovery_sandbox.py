"""The gateway finds a deployed topology's serving endpoint in its cluster, and serves through it."""

from __future__ import annotations

import pytest

from deployments.tests.conftest import conn, fast_deploys, lab, lab_sandbox, new_topology  # noqa: F401
from deployments.tests.sandbox_helpers import deploy_now
from gateway import discovery
from gateway.models import Route
from gateway.services import routes_discover

pytestmark = pytest.mark.usefixtures("fast_deploys")


def test_candidates_name_the_router_services(settings):
    class T:
        backend, namespace, name = "deployments", "prod", "qwen"

    assert discovery.candidates(T()) == [("prod", "qwen-router")]  # type: ignore[arg-type]
    T.backend = "kthena"
    settings.KTHENA_ROUTER_SERVICE = "serving/router"
    assert discovery.candidates(T()) == [("serving", "router")]  # type: ignore[arg-type]


def test_a_plain_topology_router_is_discovered_and_the_gateway_uses_it(new_topology, operator):  # noqa: F811
    import asyncio

    from gateway import inprocess
    from gateway.routes import load_table

    topology = new_topology("qwen-gpu-nixl", backend="deployments")
    deployment = deploy_now(topology, operator)
    assert deployment.state == "succeeded", (deployment.error, deployment.diagnosis)
    assert routes_discover() == 1
    route = Route.objects.get(topology=topology)
    assert route.discovered_url.startswith("http://127.")
    entry = next(e for e in load_table("t").entries() if e.topology_id == topology.pk)
    answer = asyncio.run(inprocess.chat(entry, [{"role": "user", "content": "hello"}], max_tokens=4))
    assert answer.status == 200 and answer.backend == "cluster" and answer.text
    assert routes_discover() == 0  # nothing changed: nothing published


def test_an_undeployed_or_unexposed_topology_has_no_endpoint(new_topology, operator):  # noqa: F811
    topology = new_topology("qwen-gpu-nixl")  # Kthena: no kthena-router Service in this cluster
    deployment = deploy_now(topology, operator)
    assert deployment.state == "succeeded", (deployment.error, deployment.diagnosis)
    routes_discover()
    assert Route.objects.get(topology=topology).discovered_url == ""
