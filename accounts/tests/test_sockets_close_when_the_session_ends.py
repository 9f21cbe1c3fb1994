"""A websocket lives no longer than its session: logout closes that session's sockets, deactivating or
deleting the user closes all of theirs (4401, as soon as the change commits)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from accounts import services
from controlplane.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


@pytest.fixture(autouse=True)
async def _close_database_connections_of_the_async_thread():
    yield
    await sync_to_async(connections.close_all)()


def _logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def _socket(client: Client) -> WebsocketCommunicator:
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    communicator = WebsocketCommunicator(application, "/ws/system/", headers=[*HEADERS, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_nothing(timeout=0.3)  # open, not refused
    return communicator


async def _closed_with(communicator: WebsocketCommunicator) -> int | None:
    message = await communicator.receive_output(timeout=3)
    assert message["type"] == "websocket.close", message
    return message.get("code")


async def test_logout_closes_the_sockets_of_that_session_only(viewer):
    laptop, phone = await sync_to_async(_logged_in)(viewer), await sync_to_async(_logged_in)(viewer)
    laptop_socket, phone_socket = await _socket(laptop), await _socket(phone)
    response = await sync_to_async(laptop.post)("/accounts/logout/")
    assert response.status_code in (200, 302)
    assert await _closed_with(laptop_socket) == 4401
    assert await phone_socket.receive_nothing(timeout=0.5)
    await phone_socket.disconnect()


async def test_deactivating_a_user_closes_all_their_sockets(viewer, admin_user):
    sockets = [await _socket(await sync_to_async(_logged_in)(viewer)) for _ in range(2)]
    await sync_to_async(services.user_update)(actor=admin_user, user=viewer, is_active=False)
    assert [await _closed_with(s) for s in sockets] == [4401, 4401]


async def test_deleting_a_user_closes_their_sockets_and_no_one_elses(viewer, operator, admin_user):
    theirs = await _socket(await sync_to_async(_logged_in)(viewer))
    other = await _socket(await sync_to_async(_logged_in)(operator))
    await sync_to_async(services.user_delete)(actor=admin_user, user=viewer)
    assert await _closed_with(theirs) == 4401
    assert await other.receive_nothing(timeout=0.5)
    await other.disconnect()
