"""The per-topology live stream: who is admitted, the opening snapshot, forwarded events."""

from __future__ import annotations

import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction

from controlplane.broadcast import broadcast_on_commit, topology_group
from telemetry import cache
from telemetry.snapshot import empty_snapshot
from telemetry.tests.test_consumers_access import close_code_of, close_consumer_connections, open_socket

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["close_consumer_connections"]


async def test_topology_stream_refuses_anonymous_with_4401(topology: Any) -> None:
    communicator = await open_socket(f"/ws/topologies/{topology.pk}/")
    assert await close_code_of(communicator) == 4401


async def test_topology_stream_refuses_unknown_topology_with_4403(viewer: Any) -> None:
    communicator = await open_socket("/ws/topologies/987654/", user=viewer)
    assert await close_code_of(communicator) == 4403


async def test_topology_stream_refuses_foreign_origin(topology: Any, viewer: Any) -> None:
    communicator = await open_socket(
        f"/ws/topologies/{topology.pk}/", user=viewer, origin=(b"origin", b"http://127.0.0.1.evil.example")
    )
    connected, _ = await communicator.connect(timeout=5)
    assert connected is False


async def test_topology_stream_opens_with_latest_snapshot(topology: Any, viewer: Any) -> None:
    snapshot = empty_snapshot(topology.pk, time.time(), 2.0, "no pods found yet")
    await sync_to_async(cache.set_snapshot)(snapshot)
    communicator = await open_socket(f"/ws/topologies/{topology.pk}/", user=viewer)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    first = await communicator.receive_json_from(timeout=5)
    assert first["kind"] == "telemetry"
    assert first["initial"] is True
    assert first["snapshot"]["topology_id"] == topology.pk
    assert first["snapshot"]["health"] == {"state": "unknown", "reasons": ["no pods found yet"]}
    await communicator.disconnect()


async def test_topology_stream_forwards_only_committed_events_of_its_topology(
    topology: Any, viewer: Any
) -> None:
    communicator = await open_socket(f"/ws/topologies/{topology.pk}/", user=viewer)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    assert await communicator.receive_nothing(timeout=0.3), "no snapshot cached yet: nothing to open with"

    def events() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            broadcast_on_commit(topology_group(topology.pk), {"kind": "deployment", "state": "applying"})
            raise RuntimeError("deploy failed to save")
        broadcast_on_commit(topology_group(topology.pk + 1), {"kind": "deployment", "state": "other"})
        with transaction.atomic():
            broadcast_on_commit(topology_group(topology.pk), {"kind": "deployment", "state": "succeeded"})

    await sync_to_async(events)()
    assert await communicator.receive_json_from(timeout=5) == {"kind": "deployment", "state": "succeeded"}
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()


async def test_overview_stream_opens_with_one_summary_per_topology(topology: Any, viewer: Any) -> None:
    snapshot = empty_snapshot(topology.pk, time.time(), 2.0, "no pods found yet")
    await sync_to_async(cache.set_snapshot)(snapshot)
    communicator = await open_socket("/ws/overview/", user=viewer)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    summary = await communicator.receive_json_from(timeout=5)
    assert summary["kind"] == "overview"
    assert summary["topology_id"] == topology.pk
    assert summary["health"]["state"] == "unknown"
    assert summary["name"] == topology.name
    await communicator.disconnect()
