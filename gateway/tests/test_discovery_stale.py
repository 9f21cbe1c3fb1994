"""Discovery keeps the last known endpoint through API-server trouble, and reads clusters concurrently.

The Kubernetes API servers here are scripted HTTP servers (the outer edge): per Service they answer the
Service object, the API server's own 404 NotFound Status, a 403 or 500 Status, a bare 404 (a proxy's),
or nothing at all (a hung cluster).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.urls import reverse

import kube
from gateway.models import Route
from gateway.services import routes_discover
from tests.support import closed_port

DEADLINE = 1.0


def service(ip: str, port: int = 8080, name: str = "http", **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {"name": "x", "annotations": extra.pop("annotations", {})},
        "spec": {"type": "LoadBalancer", "ports": [{"name": name, "port": port, **extra}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ip}]}},
    }


def status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code}


class ApiServer:
    """Answers GET /api/v1/namespaces/<ns>/services/<name> from `answers[name]`."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer = owner.answers.get(self.path.rsplit("/", 1)[-1], "gone")
                if answer == "hang":
                    time.sleep(DEADLINE * 3)
                    return
                code, body = (
                    {
                        "gone": (404, status(404, "NotFound")),
                        "forbidden": (403, status(403, "Forbidden")),
                        "error": (500, status(500, "InternalError")),
                        "bare404": (404, "<html>404 Not Found</html>"),
                    }.get(answer, (200, answer))
                    if isinstance(answer, str)
                    else (200, answer)
                )
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()


@pytest.fixture(scope="module")
def api_servers() -> Iterator[list[ApiServer]]:
    servers = [ApiServer() for _ in range(3)]
    yield servers
    for server in servers:
        server.server.shutdown()


@pytest.fixture
def deployed(db, admin_user, settings):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    settings.GATEWAY_DISCOVERY_DEADLINE_SECONDS = DEADLINE

    def make(name: str, api: ApiServer | str) -> Any:
        url = api if isinstance(api, str) else api.url
        cluster = Cluster.objects.get_or_create(
            name=f"c{url.rsplit(':', 1)[1]}", defaults={"auth_method": "token", "server": url}
        )[0]
        spec = {**preset_spec("qwen-gpu-nixl"), "name": name, "backend": "deployments"}
        topology = topology_create(cluster=cluster, spec=spec, actor=admin_user)
        type(topology).objects.filter(pk=topology.pk).update(deployed_revision=topology.current_revision)
        return topology

    return make


def route(topology: Any) -> Route:
    return Route.objects.get(topology=topology)


def test_api_errors_keep_the_endpoint_stale_and_only_the_api_servers_notfound_clears_it(
    deployed, api_servers, client, admin_user
):
    api = api_servers[0]
    topology = deployed("keep", api)
    api.answers["keep-router"] = service("10.0.0.7")
    assert routes_discover() == 1
    assert route(topology).discovered_url == "http://10.0.0.7:8080"
    assert route(topology).discovered_stale_since is None

    for answer, words in (
        ("forbidden", "HTTP 403"),
        ("error", "500"),
        ("bare404", "404"),
        ("hang", "no answer"),
    ):
        api.answers["keep-router"] = answer
        assert routes_discover() == 0
        kept = route(topology)
        assert kept.discovered_url == "http://10.0.0.7:8080", answer
        assert words in kept.discovered_stale_reason, (answer, kept.discovered_stale_reason)
        assert kept.discovered_stale_since is not None
    first_failure = kept.discovered_stale_since
    client.force_login(admin_user)
    panel = client.get(reverse("gateway:panel", args=[topology.pk])).content.decode()
    assert 'data-role="discovery-stale">stale<' in panel and "keeps using the last known address" in panel

    api.answers["keep-router"] = "forbidden"
    routes_discover()
    assert route(topology).discovered_stale_since == first_failure  # since the first look that failed

    api.answers["keep-router"] = "gone"  # the API server itself says the Service does not exist
    assert routes_discover() == 1
    gone = route(topology)
    assert (gone.discovered_url, gone.discovered_stale_reason, gone.discovered_stale_since) == ("", "", None)


def test_a_hung_cluster_delays_no_other(deployed, api_servers):
    hung_a, hung_b, good = api_servers
    deployed("slow-a", hung_a)
    deployed("slow-b", hung_b)
    fine = deployed("fine", good)
    refused = deployed("refused", f"http://127.0.0.1:{closed_port()}")  # nothing listens there
    Route.objects.create(topology=refused, discovered_url="http://10.0.0.8:8080")
    hung_a.answers["slow-a-router"] = hung_b.answers["slow-b-router"] = "hang"
    good.answers["fine-router"] = service("10.0.0.9", port=443, name="web")
    started = time.monotonic()
    routes_discover()
    took = time.monotonic() - started
    assert took < 2 * DEADLINE, f"{took:.2f} s: the clusters were read one after another"
    assert route(fine).discovered_url == "https://10.0.0.9:443"
    kept = route(refused)
    assert (
        kept.discovered_url == "http://10.0.0.8:8080" and "refused" in kept.discovered_stale_reason.lower()
    ), kept.discovered_stale_reason


def test_the_scheme_is_https_when_the_service_says_so():
    assert kube.service_url(service("1.2.3.4")) == "http://1.2.3.4:8080"
    assert kube.service_url(service("1.2.3.4", port=443)) == "https://1.2.3.4:443"
    assert kube.service_url(service("1.2.3.4", name="https-router")) == "https://1.2.3.4:8080"
    assert kube.service_url(service("1.2.3.4", appProtocol="https")) == "https://1.2.3.4:8080"
    annotated = service("1.2.3.4", port=443, annotations={kube.SERVING_SCHEME_ANNOTATION: "http"})
    assert kube.service_url(annotated) == "http://1.2.3.4:443"
    assert kube.service_url(service("::1", annotations={kube.SERVING_SCHEME_ANNOTATION: "https"})) == (
        "https://[::1]:8080"
    )
    assert kube.service_url({**service("1.2.3.4"), "status": {}}) == ""  # no address (yet): none
