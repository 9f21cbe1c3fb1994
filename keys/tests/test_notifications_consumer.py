"""/ws/notifications/: only the logged-in user's own group, and real budget alerts arrive on it."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from controlplane.asgi import application
from controlplane.broadcast import send_now, user_group
from keys import accounting, services

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


@pytest.fixture(autouse=True)
async def close_consumer_connections():
    yield
    await sync_to_async(connections.close_all)()


def session_cookie(user: Any) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def socket_for(user: Any = None) -> WebsocketCommunicator:
    headers = list(HEADERS)
    if user is not None:
        headers.append((b"cookie", await sync_to_async(session_cookie)(user)))
    return WebsocketCommunicator(application, "/ws/notifications/", headers=headers)


async def test_anonymous_is_refused_with_4401_before_joining_anything() -> None:
    communicator = await socket_for()
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close" and message["code"] == 4401


async def test_deactivated_user_is_refused(make_user: Any) -> None:
    user = await sync_to_async(make_user)("operator", username="leaver")
    communicator = await socket_for(user)
    user.is_active = False
    await sync_to_async(user.save)()
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close" and message["code"] == 4401


async def test_owner_gets_a_real_budget_alert_and_nobody_else_does(make_user: Any) -> None:
    owner = await sync_to_async(make_user)("operator", username="owner")
    other = await sync_to_async(make_user)("operator", username="other")
    mine = await socket_for(owner)
    theirs = await socket_for(other)
    assert (await mine.connect(timeout=5))[0]
    assert (await theirs.connect(timeout=5))[0]
    assert await mine.receive_nothing(timeout=0.3)

    issued = await sync_to_async(services.key_create)(
        actor=owner, name="assistant", purpose="coding-assistant", limits_given={"requests_per_day": 100}
    )
    recorded = await sync_to_async(accounting.key_budget_alert_record)(
        key_id=str(issued.key.pk), crossed="requests_per_day:20261201:80"
    )
    assert recorded

    message = await mine.receive_json_from(timeout=5)
    assert message["type"] == "key.budget_alert"
    assert message["key"] == str(issued.key.pk) and message["percent"] == 80
    assert "assistant" in message["message"] and "80 %" in message["message"]
    assert issued.secret not in str(message)
    assert await theirs.receive_nothing(timeout=0.5), "another user's socket must not get the alert"

    # once per window: the same threshold in the same window tells nobody again
    again = await sync_to_async(accounting.key_budget_alert_record)(
        key_id=str(issued.key.pk), crossed="requests_per_day:20261201:80"
    )
    assert not again and await mine.receive_nothing(timeout=0.5)
    await mine.disconnect()
    await theirs.disconnect()


async def test_a_socket_joins_only_its_own_users_group(make_user: Any) -> None:
    alice = await sync_to_async(make_user)("viewer", username="alice")
    bob = await sync_to_async(make_user)("admin", username="bob")
    communicator = await socket_for(alice)
    assert (await communicator.connect(timeout=5))[0]
    await sync_to_async(send_now)(user_group(bob.pk), {"type": "key.budget_alert", "key": "x"})
    assert await communicator.receive_nothing(timeout=0.5)
    await sync_to_async(send_now)(user_group(alice.pk), {"type": "key.budget_alert", "key": "y"})
    assert (await communicator.receive_json_from(timeout=5))["key"] == "y"
    await communicator.disconnect()
