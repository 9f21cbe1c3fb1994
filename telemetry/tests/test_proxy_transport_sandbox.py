"""kube.proxy against the sandbox over HTTPS: the async transport verifies the API server with the
cluster's CA, and the API server's answers come back in words an operator acts on."""

from __future__ import annotations

import itertools

import kube
from telemetry.assemble import PodTarget
from telemetry.scrape import Scraper, ScrapeRequest
from telemetry.sources import ApiProxyTransport

_ids = itertools.count(7700)


def _conn(sandbox, token=None) -> kube.ClusterConnection:
    return kube.ClusterConnection(
        cluster_id=next(_ids),
        server=sandbox.server,
        token=token or sandbox.token,
        ca_data=sandbox.ca_path.read_text() if sandbox.ca_path else None,
        credential_version="t",
        cluster_name="sandbox",
    )


def _scrape(conn: kube.ClusterConnection, pod: str) -> str | None:
    scraper = Scraper()
    target = PodTarget(name=pod, role="decode", ip="127.0.0.1", port=8000, ready=True, phase="Running")
    try:
        transport = ApiProxyTransport("default", kube.proxy_transport(conn))
        [result] = scraper.scrape([ScrapeRequest(target=target)], timeout_s=5, transport=transport)
    finally:
        scraper.close()
    return result.error


def test_proxied_scrape_over_tls_names_the_api_servers_answer(sandbox_cluster_tls):
    error = _scrape(_conn(sandbox_cluster_tls), "no-such-pod")
    assert error == 'metrics source proxy: 404 from API server: pods "no-such-pod" not found'


def test_refused_credentials_say_to_update_them(sandbox_cluster_tls):
    error = _scrape(_conn(sandbox_cluster_tls, token="not-the-token"), "any")
    assert error is not None and error.startswith("metrics source proxy: 401 from API server")


def test_sync_proxy_get_returns_every_status(sandbox_cluster_tls):
    response = kube.pod_proxy_get(_conn(sandbox_cluster_tls), "default", "no-such-pod", 8000, "metrics")
    assert response.status == 404 and response.json()["reason"] == "NotFound"
