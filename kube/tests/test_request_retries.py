"""The retry policy over real HTTP, against a scripted local server (the network edge is the only fake)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kube import ClusterConnection, KubeInvalid, KubeUnreachable, request, update_object
from kube.retry import RetryPolicy


class Scripted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, replies):
        super().__init__(("127.0.0.1", 0), Handler)
        self.replies = list(replies)
        self.seen: list[tuple[str, str, bytes]] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        return

    def _reply(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path, body))
        status, headers, payload = self.server.replies.pop(0) if self.server.replies else (200, {}, {})
        data = json.dumps(payload).encode()
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _reply


@pytest.fixture
def server():
    servers = []

    def start(*replies):
        srv = Scripted(replies)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def conn_for(srv, cid=901) -> ClusterConnection:
    return ClusterConnection(
        cluster_id=cid,
        server=f"http://127.0.0.1:{srv.server_address[1]}",
        token="t0k",
        credential_version=str(id(srv)),
        cluster_name="lab",
    )


def test_429_retry_after_is_honoured(server):
    srv = server(
        (429, {"Retry-After": "2"}, {"kind": "Status", "code": 429}), (200, {}, {"gitVersion": "v1.31.0"})
    )
    waits: list[float] = []
    response = request(conn_for(srv), "GET", "/version", sleep=waits.append)
    assert response.json() == {"gitVersion": "v1.31.0"}
    assert waits == [2.0]
    assert len(srv.seen) == 2


def test_422_is_not_retried_and_names_the_field(server):
    status = {
        "kind": "Status",
        "code": 422,
        "reason": "Invalid",
        "message": "invalid",
        "details": {"causes": [{"field": "spec.replicas", "message": "must be >= 0"}]},
    }
    srv = server((422, {}, status), (200, {}, {}))
    with pytest.raises(KubeInvalid) as err:
        request(
            conn_for(srv),
            "PATCH",
            "/apis/apps/v1/namespaces/x/deployments/d",
            body="{}",
            content_type="application/apply-patch+yaml",
            action="apply Deployment x/d",
            sleep=lambda s: None,
        )
    assert len(srv.seen) == 1
    assert err.value.causes == [("spec.replicas", "must be >= 0")]
    assert (
        err.value.message
        == "cluster `lab` refused apply Deployment x/d: spec.replicas: must be >= 0 (HTTP 422)"
    )


def test_5xx_is_retried_until_the_attempts_run_out(server):
    srv = server(*[(503, {}, {"message": "etcd leader changed"})] * 5)
    waits: list[float] = []
    with pytest.raises(KubeUnreachable, match="HTTP 503"):
        request(conn_for(srv), "GET", "/api/v1/nodes", policy=RetryPolicy(max_attempts=3), sleep=waits.append)
    assert len(srv.seen) == 3
    assert len(waits) == 2


def test_bearer_token_is_sent(server):
    srv = server((200, {}, {}))
    seen_auth = []

    class Capture(Handler):
        def _reply(self):
            seen_auth.append(self.headers.get("Authorization"))
            super()._reply()

        do_GET = _reply

    srv.RequestHandlerClass = Capture
    request(conn_for(srv), "GET", "/version")
    assert seen_auth == ["Bearer t0k"]


def test_409_on_update_rereads_and_retries(server):
    current = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "resourceVersion": "1"}}
    fresh = {**current, "metadata": {"name": "c", "resourceVersion": "2"}}
    srv = server(
        (200, {}, current),
        (409, {}, {"kind": "Status", "code": 409, "reason": "Conflict"}),
        (200, {}, fresh),
        (200, {}, {**fresh, "data": {"k": "v"}}),
    )
    result = update_object(conn_for(srv), "v1", "ConfigMap", "ns", "c", lambda o: {**o, "data": {"k": "v"}})
    assert result["data"] == {"k": "v"}
    methods = [m for m, _, _ in srv.seen]
    assert methods == ["GET", "PUT", "GET", "PUT"]
    assert json.loads(srv.seen[3][2])["metadata"]["resourceVersion"] == "2"


def test_connection_refused_reads_as_words():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conn = ClusterConnection(cluster_id=902, server=f"http://127.0.0.1:{port}", credential_version="x")
    with pytest.raises(KubeUnreachable) as err:
        request(conn, "GET", "/version", sleep=lambda s: None)
    assert err.value.message == f"cannot reach http://127.0.0.1:{port}: connection refused"
