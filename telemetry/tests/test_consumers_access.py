"""Who may open the live telemetry websockets, and what the first messages are."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections, transaction
from django.test import Client

from controlplane.asgi import application
from controlplane.broadcast import broadcast_on_commit, overview_group, send_now

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")


@pytest.fixture(autouse=True)
async def close_consumer_connections():
    """Consumers query from asgiref's sync thread; close that thread's connections after each test."""
    yield
    await sync_to_async(connections.close_all)()


def session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def open_socket(
    path: str, *, user: Any = None, origin: tuple[bytes, bytes] = ORIGIN
) -> WebsocketCommunicator:
    headers = [origin, HOST]
    if user is not None:
        headers.append((b"cookie", await sync_to_async(session_cookie)(user)))
    return WebsocketCommunicator(application, path, headers=headers)


async def close_code_of(communicator: WebsocketCommunicator) -> int | None:
    """Connects and returns the close code the server sent right away, or None when it stayed open."""
    connected, _ = await communicator.connect(timeout=5)
    if not connected:
        return None
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close", message
    return int(message["code"])


async def test_overview_refuses_anonymous_with_4401() -> None:
    communicator = await open_socket("/ws/overview/")
    assert await close_code_of(communicator) == 4401


async def test_overview_refuses_foreign_origin_before_handshake(viewer: Any) -> None:
    communicator = await open_socket(
        "/ws/overview/", user=viewer, origin=(b"origin", b"https://evil.example")
    )
    connected, _ = await communicator.connect(timeout=5)
    assert connected is False


async def test_overview_refuses_inactive_user_with_4403(make_user: Any) -> None:
    user = await sync_to_async(make_user)("viewer", username="former-viewer")
    communicator = await open_socket("/ws/overview/", user=user)
    user.is_active = False
    await sync_to_async(user.save)()
    # The session of a deactivated user no longer authenticates: refused as anonymous.
    assert await close_code_of(communicator) == 4401


async def test_overview_admits_viewer_and_forwards_broadcast_after_commit(viewer: Any) -> None:
    communicator = await open_socket("/ws/overview/", user=viewer)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    assert await communicator.receive_nothing(timeout=0.3)

    def send_and_roll_back() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            broadcast_on_commit(overview_group(), {"kind": "overview", "topology_id": 1, "health": "down"})
            raise RuntimeError("the write failed")

    await sync_to_async(send_and_roll_back)()
    assert await communicator.receive_nothing(timeout=0.5), "a rolled-back event must never be sent"

    def send_and_commit() -> None:
        with transaction.atomic():
            broadcast_on_commit(overview_group(), {"kind": "overview", "topology_id": 1, "health": "healthy"})

    await sync_to_async(send_and_commit)()
    message = await communicator.receive_json_from(timeout=5)
    assert message == {"kind": "overview", "topology_id": 1, "health": "healthy"}
    await communicator.disconnect()


async def test_every_overview_socket_gets_each_broadcast_as_sent(viewer: Any) -> None:
    sockets = [await open_socket("/ws/overview/", user=viewer) for _ in range(3)]
    for communicator in sockets:
        assert (await communicator.connect(timeout=5))[0]
    summaries = [
        {"kind": "overview", "topology_id": 1, "health": "down", "pods": 4},
        {"kind": "overview", "topology_id": 1, "health": "down", "pods": 4},
        {"kind": "overview", "topology_id": 1, "health": "healthy", "pods": 4},
    ]
    for summary in summaries:
        await sync_to_async(send_now)(overview_group(), summary)
        for communicator in sockets:
            assert await communicator.receive_json_from(timeout=5) == summary
    for communicator in sockets:
        await communicator.disconnect()
