"""Live telemetry websockets: one topology's stream and the overview stream.

Both build on ``controlplane.consumers.TandemConsumer``: the session authenticates at connect, access
is decided BEFORE any ``group_add``, refusals close with 4401 (no session) or 4403 (role too low, or
no such topology — the two are not told apart, so ids cannot be probed), and group broadcasts from
``controlplane.broadcast`` are forwarded as they are.

The first message on a topology socket is the latest snapshot from the cache, so the page fills in
without waiting for the next collection; the overview socket starts with one summary per topology.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from channels.db import database_sync_to_async

from controlplane.broadcast import overview_group, topology_group
from controlplane.consumers import TandemConsumer
from telemetry import selectors

log = logging.getLogger(__name__)


class _LastEncoded:
    """The JSON text of the last payload forwarded in this process: every socket of a group gets an
    equal copy of one broadcast, which is encoded once rather than once per socket (comparing the
    copies costs a fraction of encoding them)."""

    payload: object = object()  # matches no payload
    text = ""

    @classmethod
    def text_of(cls, payload: object) -> str:
        if payload is not cls.payload and payload != cls.payload:
            cls.text = json.dumps(payload)
        cls.payload = payload
        return cls.text


class LiveConsumer(TandemConsumer):
    """A one-way stream whose broadcasts are forwarded without any database work."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels checks the database connections (a hop to the one sync thread) before EVERY
        # message; forwarding a broadcast touches no database, and with hundreds of sockets those
        # serialised hops made fan-out latency grow with the number of clients.
        if message.get("type") == "broadcast.event":
            await self.send(text_data=_LastEncoded.text_of(message["payload"]))
            return
        await super().dispatch(message)


def _topology_exists(topology_id: int) -> bool:
    from topologies.models import Topology

    return Topology.objects.filter(pk=topology_id).exists()


def _latest_snapshot(topology_id: int) -> dict[str, Any] | None:
    snapshot = selectors.latest_snapshot(topology_id=topology_id)
    return dict(snapshot) if snapshot else None


def _overview_summaries() -> list[dict[str, Any]]:
    return [dict(row) for row in selectors.overview_summaries()]


class TopologyConsumer(LiveConsumer):
    """``/ws/topologies/<id>/``: telemetry snapshots, deployment progress and alerts of one topology."""

    def group_names(self) -> list[str]:
        return [topology_group(self.topology_id)]

    async def may_join(self) -> bool:
        self.topology_id = int(self.scope["url_route"]["kwargs"]["topology_id"])
        return bool(await database_sync_to_async(_topology_exists)(self.topology_id))

    async def after_join(self) -> None:
        try:
            snapshot = await database_sync_to_async(_latest_snapshot)(self.topology_id)
        except Exception:  # the live stream still works without the opening snapshot
            log.exception("latest snapshot of topology %s unavailable", self.topology_id)
            return
        if snapshot is not None:
            await self.send_json({"kind": "telemetry", "snapshot": snapshot, "initial": True})


class OverviewConsumer(LiveConsumer):
    """``/ws/overview/``: one small summary per topology after each collection."""

    def group_names(self) -> list[str]:
        return [overview_group()]

    async def after_join(self) -> None:
        try:
            summaries = await database_sync_to_async(_overview_summaries)()
        except Exception:
            log.exception("overview summaries unavailable")
            return
        for summary in summaries:
            await self.send_json({**summary, "kind": "overview", "initial": True})
