"""Websocket group names and the one helper that sends events, only after the transaction commits."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from controlplane.loopthread import LoopThread

logger = logging.getLogger(__name__)
# Events go out on one loop per process, so the channel layer's Redis connections are kept between
# them (a loop per event made every send connect anew: tens of milliseconds per live update).
_sender = LoopThread("broadcast")


def topology_group(topology_id: int) -> str:
    return f"topology.{topology_id}"


def overview_group() -> str:
    return "overview"


def system_group() -> str:
    """The heartbeat of the background pipeline (beat -> worker -> channel layer), for every page."""
    return "system"


def user_group(user_id: int) -> str:
    """Notifications for one user (budget alerts of their keys), on every page they have open."""
    return f"user.{user_id}"


def sessions_group(user_id: int) -> str:
    """Control messages to every socket of one user (never forwarded to the browser)."""
    return f"sessions.{user_id}"


def sessions_end_on_commit(user_id: int, session_key: str | None = None) -> None:
    """Close the user's open websockets once the transaction commits: those of one session (a logout),
    or all of them (``session_key`` None: the user was deactivated or deleted)."""
    event = {"type": "session.end", "session_key": session_key}
    transaction.on_commit(lambda: send_now(sessions_group(user_id), {}, event=event))


def start() -> None:
    """Start the sender's loop (its thread) and make the channel layer now, not at the first event: a
    process whose first event comes at a bad moment (the gateway's first breaker change) calls this
    at start-up."""
    get_channel_layer()
    _sender.loop()


def send_now(group: str, message: dict[str, Any], *, event: dict[str, Any] | None = None) -> None:
    """Send to a group immediately; callers outside a transaction (e.g. after a commit) use this.
    ``event`` replaces the ``broadcast.event`` envelope for control messages to consumers."""
    layer = get_channel_layer()
    if layer is None:
        return
    deadline = 2 * float(getattr(settings, "REDIS_SOCKET_TIMEOUT_SECONDS", 1.0))

    async def send() -> None:
        await asyncio.wait_for(
            layer.group_send(group, event or {"type": "broadcast.event", "payload": message}),
            timeout=deadline,
        )

    # Live events are best effort: pages re-fetch their state on reconnect. A Redis outage must not
    # hang or fail the request (or task) whose commit the event announces.
    try:
        _sender.run(send(), timeout=deadline + 1)
    except (TimeoutError, OSError, ConnectionError) as error:
        logger.warning("event to %s not sent: Redis did not take it (%s)", group, error or "timeout")
    except Exception as error:
        import redis

        if not isinstance(error, redis.RedisError):
            raise
        logger.warning("event to %s not sent: Redis did not take it (%s)", group, error)


def broadcast_on_commit(group: str, message: dict[str, Any]) -> None:
    """Queue an event for `group`; it is sent only if and when the surrounding transaction commits.

    Consumers receive ``{"type": "broadcast.event", "payload": message}`` and forward ``payload``.
    """
    transaction.on_commit(lambda: send_now(group, message))
