"""Websockets are same-origin only (scheme, host and port), and an unknown /ws/ path is closed cleanly."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from controlplane.asgi import application
from controlplane.origin import same_origin_allowed
from standalone.runner import web_command
from tests.support import ROOT, free_port, http_get, stop, subprocess_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

HOST = (b"host", b"127.0.0.1:8000")


@pytest.fixture(autouse=True)
async def _close_database_connections_of_the_async_thread():
    yield
    await sync_to_async(connections.close_all)()


def _cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _opens(origin: bytes | None, cookie: bytes, host: tuple[bytes, bytes] = HOST, **scope) -> bool:
    headers = [host, (b"cookie", cookie)] + ([(b"origin", origin)] if origin is not None else [])
    communicator = WebsocketCommunicator(application, "/ws/system/", headers=headers)
    communicator.scope.update(scope)
    connected, _ = await communicator.connect(timeout=3)
    await communicator.disconnect()
    return connected


@pytest.mark.parametrize(
    "origin",
    [
        b"http://127.0.0.1:9000",  # same host, another port
        b"http://127.0.0.1",  # same host, default port (80), not 8000
        b"https://127.0.0.1:8000",  # same host and port, another scheme
        b"http://localhost:8000",  # another host name (also an allowed host)
        b"null",
    ],
)
async def test_a_page_of_another_origin_on_the_same_host_cannot_open_a_stream(viewer, origin):
    cookie = await sync_to_async(_cookie)(viewer)
    assert not await _opens(origin, cookie)


async def test_the_same_origin_opens_the_stream_and_a_missing_origin_does_not(viewer):
    cookie = await sync_to_async(_cookie)(viewer)
    assert await _opens(b"http://127.0.0.1:8000", cookie)
    assert not await _opens(None, cookie)


async def test_wss_needs_an_https_origin(viewer):
    cookie = await sync_to_async(_cookie)(viewer)
    assert await _opens(b"https://127.0.0.1:8000", cookie, scheme="wss")
    assert not await _opens(b"http://127.0.0.1:8000", cookie, scheme="wss")


def test_the_rule_normalises_default_ports_and_honours_trusted_origins():
    rule = {"allowed_hosts": ["tandem.example.com"], "server": None}
    assert same_origin_allowed(
        origin="https://tandem.example.com",
        scheme="https",
        host_header="tandem.example.com:443",
        trusted_origins=[],
        **rule,
    )
    assert not same_origin_allowed(
        origin="https://tandem.example.com:8443",
        scheme="https",
        host_header="tandem.example.com",
        trusted_origins=[],
        **rule,
    )
    assert same_origin_allowed(
        origin="https://ops.example.com",
        scheme="http",
        host_header="tandem.example.com",
        trusted_origins=["https://ops.example.com"],
        **rule,
    )
    assert same_origin_allowed(
        origin="http://[::1]:8000",
        scheme="http",
        host_header="[::1]:8000",
        trusted_origins=[],
        allowed_hosts=["[::1]"],
        server=None,
    )
    assert not same_origin_allowed(  # same origin, but not a host Tandem answers to
        origin="http://evil.example",
        scheme="http",
        host_header="evil.example",
        trusted_origins=[],
        **rule,
    )


async def test_an_unknown_ws_path_is_closed_with_4404(viewer):
    cookie = await sync_to_async(_cookie)(viewer)
    communicator = WebsocketCommunicator(
        application,
        "/ws/no-such-stream/",
        headers=[HOST, (b"origin", b"http://127.0.0.1:8000"), (b"cookie", cookie)],
    )
    connected, _ = await communicator.connect(timeout=3)
    assert connected
    message = await communicator.receive_output(timeout=3)
    assert message["type"] == "websocket.close" and message["code"] == 4404


def test_real_connections_to_uvicorn_same_origin_only_and_unknown_paths_closed_without_a_traceback():
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        web_command(port),
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    async def scenario() -> tuple[list[object], int | None]:
        outcomes: list[object] = []
        for origin in (f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}"):
            try:
                async with connect(f"ws://127.0.0.1:{port}/ws/system/", origin=origin):
                    outcomes.append("open")
            except InvalidStatus as error:
                outcomes.append(error.response.status_code)
        async with connect(f"ws://127.0.0.1:{port}/ws/system/", origin=base) as socket:
            outcomes.append("open")  # no session: accepted, then closed with 4401
        async with connect(f"ws://127.0.0.1:{port}/ws/nothing/here/", origin=base) as socket:
            try:
                await asyncio.wait_for(socket.recv(), timeout=5)
            except ConnectionClosed as closed:
                return outcomes, closed.rcvd.code if closed.rcvd else None
        return outcomes, None

    try:
        wait_until(lambda: http_get(base + "/healthz", timeout=1)[0] == 200, 30, "uvicorn", proc)
        outcomes, code = asyncio.run(scenario())
    finally:
        stop(proc)
    output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    assert outcomes == [403, 403, "open"]
    assert code == 4404
    assert "Traceback" not in output and "ValueError" not in output, output[-3000:]


@pytest.mark.parametrize(
    "path", ["/ws/topologies/99999999999999999999/", "/ws/topologies/0/", "/ws/topologies/x/"]
)
async def test_a_topology_stream_that_cannot_exist_is_closed_not_crashed(viewer, path):
    cookie = await sync_to_async(_cookie)(viewer)
    communicator = WebsocketCommunicator(
        application, path, headers=[HOST, (b"origin", b"http://127.0.0.1:8000"), (b"cookie", cookie)]
    )
    connected, _ = await communicator.connect(timeout=3)
    assert connected
    message = await communicator.receive_output(timeout=3)
    assert message["type"] == "websocket.close" and message["code"] in (4403, 4404)
