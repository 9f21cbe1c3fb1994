"""Websockets: origin check, session required, access checked before joining, events forwarded."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.db import connections
from django.test import Client
from django.urls import path

from accounts.roles import Role
from controlplane.asgi import application
from controlplane.consumers import HEARTBEAT_CACHE_KEY, TandemConsumer
from controlplane.tasks import heartbeat

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")


def _session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _close_code(communicator: WebsocketCommunicator) -> int | None:
    message = await communicator.receive_output(timeout=3)
    assert message["type"] == "websocket.close"
    return message.get("code")


@pytest.fixture(autouse=True)
async def _close_database_connections_of_the_async_thread():
    yield
    # The session lookups ran in asgiref's worker thread; close its connection so the test
    # database can be dropped at the end of the run.
    await sync_to_async(connections.close_all)()


@pytest.fixture
def viewer_cookie(viewer):
    return _session_cookie(viewer)


async def test_websocket_from_a_foreign_origin_is_refused(viewer_cookie):
    communicator = WebsocketCommunicator(
        application, "/ws/system/", headers=[(b"origin", b"https://evil.example"), (b"cookie", viewer_cookie)]
    )
    connected, _ = await communicator.connect()
    assert not connected


async def test_websocket_without_a_session_is_closed_with_4401():
    communicator = WebsocketCommunicator(application, "/ws/system/", headers=[ORIGIN, HOST])
    connected, _ = await communicator.connect()
    assert connected  # accepted only so the browser sees the reason...
    assert await _close_code(communicator) == 4401  # ...then closed: log in again
    await communicator.disconnect()


async def test_session_websocket_receives_heartbeats_sent_by_the_task(viewer_cookie):
    communicator = WebsocketCommunicator(
        application, "/ws/system/", headers=[ORIGIN, HOST, (b"cookie", viewer_cookie)]
    )
    connected, _ = await communicator.connect()
    assert connected
    await sync_to_async(heartbeat)()
    message = await communicator.receive_json_from(timeout=3)
    assert message["kind"] == "heartbeat" and message["interval"] > 0
    await communicator.disconnect()


async def test_a_new_connection_gets_the_last_heartbeat_at_once(viewer_cookie):
    await sync_to_async(heartbeat)()
    communicator = WebsocketCommunicator(
        application, "/ws/system/", headers=[ORIGIN, HOST, (b"cookie", viewer_cookie)]
    )
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from(timeout=3))["kind"] == "heartbeat"
    await communicator.disconnect()
    await sync_to_async(cache.delete)(HEARTBEAT_CACHE_KEY)


class OperatorsOnly(TandemConsumer):
    required_role = Role.OPERATOR

    def group_names(self) -> list[str]:
        return ["test.operators"]


class NeverJoins(TandemConsumer):
    checked = False

    async def may_join(self) -> bool:
        NeverJoins.checked = True
        return False

    def group_names(self) -> list[str]:
        raise AssertionError("groups must not be asked for before may_join allows it")


streams_app = AuthMiddlewareStack(
    URLRouter([path("ws/ops/", OperatorsOnly.as_asgi()), path("ws/never/", NeverJoins.as_asgi())])
)


async def test_a_role_below_the_stream_is_closed_with_4403(viewer_cookie):
    communicator = WebsocketCommunicator(streams_app, "/ws/ops/", headers=[(b"cookie", viewer_cookie)])
    await communicator.connect()
    assert await _close_code(communicator) == 4403
    await communicator.disconnect()


async def test_may_join_runs_before_any_group_is_joined(viewer_cookie):
    communicator = WebsocketCommunicator(streams_app, "/ws/never/", headers=[(b"cookie", viewer_cookie)])
    await communicator.connect()
    assert await _close_code(communicator) == 4403
    assert NeverJoins.checked
    await communicator.disconnect()


async def test_operator_stream_forwards_group_events_only_after_joining(operator):
    cookie = await sync_to_async(_session_cookie)(operator)
    communicator = WebsocketCommunicator(streams_app, "/ws/ops/", headers=[(b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected
    await get_channel_layer().group_send("test.operators", {"type": "broadcast.event", "payload": {"n": 1}})
    assert await communicator.receive_json_from(timeout=3) == {"n": 1}
    await communicator.disconnect()
    await get_channel_layer().group_send("test.operators", {"type": "broadcast.event", "payload": {"n": 2}})
    assert await communicator.receive_nothing(timeout=0.3)
