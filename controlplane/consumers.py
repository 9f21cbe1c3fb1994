"""The base websocket consumer every app subclasses, and the system heartbeat stream.

A consumer authenticates at connect, asks `may_join()` before joining any group, and forwards the
`broadcast.event` messages that `controlplane.broadcast` sends. Refusals are explicit close codes
the browser helper (`static/js/live.js`) understands and does not retry:

* 4401 — no session (log in again);
* 4403 — logged in, but this user may not see what the route names;
* 4404 — no stream at this path (`UnknownStreamConsumer`, the router's last route).

Every socket also listens to its user's sessions group: a logout closes that session's sockets, and
deactivating or deleting the user closes all of theirs, with 4401, as soon as the change commits.
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.cache import cache

from accounts.permissions import user_has_role
from accounts.roles import Role
from controlplane import broadcast

CLOSE_NO_SESSION = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


class TandemConsumer(AsyncJsonWebsocketConsumer):
    """Authenticate, authorise, then join. Subclasses override `may_join` and `group_names`."""

    #: The least role that may open this stream at all; `may_join` can refine per object.
    required_role: str = Role.VIEWER

    async def connect(self) -> None:
        self.joined: list[str] = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_NO_SESSION)
            return
        if not user_has_role(user, self.required_role) or not await self.may_join():
            await self.refuse(CLOSE_FORBIDDEN)
            return
        session = self.scope.get("session")
        self.session_key = getattr(session, "session_key", None)
        for group in [broadcast.sessions_group(user.pk), *self.group_names()]:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)
        await self.accept()
        await self.after_join()

    async def refuse(self, code: int) -> None:
        # Accept first so the close code reaches the browser (a rejected handshake carries none).
        await self.accept()
        await self.close(code=code)

    async def may_join(self) -> bool:
        """Return False to refuse with 4403. Runs before any `group_add`; may query the database
        (wrap ORM calls with `channels.db.database_sync_to_async`)."""
        return True

    def group_names(self) -> list[str]:
        """Groups this connection listens to (names from `controlplane.broadcast`)."""
        return []

    async def after_join(self) -> None:
        """Send an initial state right after joining, so the page needs no extra request."""

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Streams are server-to-browser; anything the browser sends is ignored."""

    async def broadcast_event(self, event: dict[str, Any]) -> None:
        await self.send_json(event["payload"])

    async def session_end(self, event: dict[str, Any]) -> None:
        """The user logged out of this session, or was deactivated or deleted: log in again."""
        if event.get("session_key") in (None, self.session_key):
            await self.close(code=CLOSE_NO_SESSION)


class SystemConsumer(TandemConsumer):
    """`/ws/system/`: the heartbeat of beat + worker, shown as the live indicator on every page."""

    def group_names(self) -> list[str]:
        return [broadcast.system_group()]

    async def after_join(self) -> None:
        last = await cache.aget(HEARTBEAT_CACHE_KEY)
        if last is not None:
            await self.send_json(last)


HEARTBEAT_CACHE_KEY = "controlplane:heartbeat:last"


class UnknownStreamConsumer(AsyncJsonWebsocketConsumer):
    """Any /ws/ path no route names: accepted only to be closed with 4404 (an unmatched path would
    otherwise end in the router's ValueError, a traceback and a failed handshake)."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Nothing is read from a socket that is being closed."""
