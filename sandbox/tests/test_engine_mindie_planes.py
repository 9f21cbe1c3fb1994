"""The sandbox's MindIE serves its three planes where its config.json puts them, as MindIE-LLM's
http_server.cpp does: /metrics only on metricsPort, the management routes on managementPort (here the
service port, as Tandem renders it), inference on port; a route asked on the wrong plane is a 404."""

from __future__ import annotations

import json
import socket

import aiohttp

from sandbox.engine.farm import EngineFarm
from sandbox.engine.planes import plane_of, socket_planes
from sandbox.engine.spec import parse_engine_spec
from sandbox.engine.testing import engine_spec, loopback_base
from topologies.render import engine as render
from topologies.spec import TopologySpec
from topologies.tests.combinations import combination


def _free_port(ip: str) -> int:
    with socket.socket() as probe:
        probe.bind((ip, 0))
        return int(probe.getsockname()[1])


def test_the_rendered_config_puts_metrics_on_their_own_port_and_the_sandbox_reads_it():
    spec = TopologySpec.from_dict(combination("mindie", "llm-datadist", "deployments"))
    config = render.mindie_config(spec, "decode")["ServerConfig"]
    assert (config["port"], config["managementPort"], config["metricsPort"]) == (
        spec.port,
        spec.port,
        spec.port + 2,
    )
    # the keys MindIE-LLM's server_config.cpp makes compulsory are all there
    assert {"ipAddress", "port", "maxLinkNum", "httpsEnabled", "inferMode", "allowAllZeroIpListening"} <= set(
        config
    )
    assert {"metricsPort", "tokenTimeout", "e2eTimeout"} <= set(config)
    ports = {p["name"]: p["containerPort"] for p in render.container_ports(spec, "decode")}
    assert ports["metrics"] == spec.port + 2 and ports["http"] == spec.port
    container = {
        "name": "engine",
        "image": "mindie:2.0",
        "command": ["mindieservice_daemon"],
        "env": [
            {"name": "MINDIE_ROLE", "value": "decode"},
            {"name": "MIES_CONTAINER_IP", "value": "10.0.0.5"},
        ],
        "ports": render.container_ports(spec, "decode"),
    }
    files = {"/etc/tandem/mindie-decode.json": json.dumps(render.mindie_config(spec, "decode"))}
    parsed = parse_engine_spec({"metadata": {"name": "m"}, "spec": {"containers": [container]}}, files)
    assert (parsed.port, parsed.management_port, parsed.metrics_port) == (spec.port, None, spec.port + 2)
    assert plane_of("/v1/role/decode") == "management" and plane_of("/v1/chat/completions") == "service"
    assert socket_planes(1025, 1026, 1027) == {
        1025: frozenset({"service"}),
        1026: frozenset({"management"}),
        1027: frozenset({"metrics"}),
    }


async def test_each_plane_answers_only_its_own_routes():
    farm = EngineFarm()
    ip = f"{loopback_base()}.2"
    port, metrics_port = _free_port(ip), _free_port(ip)
    base = engine_spec("decode", engine="mindie", port=port)
    spec = type(base)(**{**base.__dict__, "metrics_port": metrics_port})
    await farm.start("sim/mindie-0", ip, spec, {})
    try:
        async with aiohttp.ClientSession() as session:
            service, metrics = f"http://{ip}:{port}", f"http://{ip}:{metrics_port}"
            assert farm.plane_address("sim/mindie-0", "metrics") == (ip, metrics_port)
            async with session.get(f"{metrics}/metrics") as r:
                assert r.status == 200 and "num_requests_running" in await r.text()
            async with session.get(f"{service}/metrics") as r:
                assert r.status == 404
            async with session.get(f"{service}/v1/status") as r:  # management on the service port
                assert r.status == 200 and "linkStatus" in await r.json()
            for path in ("/v1/status", "/v1/models"):
                async with session.get(f"{metrics}{path}") as r:
                    assert r.status == 404, path
    finally:
        await farm.close()
