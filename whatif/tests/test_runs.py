"""What-if runs as jobs: the task replays split by split, records its progress and sends it to the
topology's websocket group; a cancel stops it between splits; the limits per topology and per person."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from controlplane.api.errors import Conflict, DomainError
from controlplane.broadcast import topology_group
from whatif import services, simulation
from whatif.models import WhatIfRun, WhatIfState
from whatif.tasks import run_whatif


@pytest.mark.django_db(transaction=True)
async def test_a_run_reports_its_progress_on_the_topology_socket_and_stores_the_result(
    make_topology, record, calibrated, operator
):
    topology = await sync_to_async(make_topology)(budget=3)
    await sync_to_async(record)(topology)
    await sync_to_async(calibrated)(topology)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(topology_group(topology.pk), channel)
    try:
        run = await sync_to_async(services.whatif_run_create)(
            topology=topology, user=operator, window_seconds=300
        )
        await sync_to_async(run_whatif)(run.pk)  # the task's body, as the worker runs it
        seen = []
        while not seen or seen[-1]["state"] not in ("succeeded", "failed"):
            payload = (await asyncio.wait_for(layer.receive(channel), 5))["payload"]
            if payload.get("kind") == "whatif" and payload["id"] == run.pk:
                seen.append(payload)
    finally:
        await layer.group_discard(topology_group(topology.pk), channel)
    assert seen[-1]["state"] == "succeeded", seen
    steps = [e["step"] for e in seen if e["state"] == "running"]
    assert "simulating 1P/2D (1 of 2)" in steps and "simulating 2P/1D (2 of 2)" in steps
    progress = [e["progress"] for e in seen if e["state"] == "running"]
    assert progress == sorted(progress) and progress[-1] == 1.0
    stored = await WhatIfRun.objects.aget(pk=run.pk)
    assert [(s["prefill"], s["decode"]) for s in stored.result["splits"]] == [(1, 2), (2, 1)]
    assert stored.result["recommended"] in stored.result["splits"] and stored.result["current"] == {
        "prefill": 1,
        "decode": 1,
    }
    await sync_to_async(run_whatif)(run.pk)  # a second delivery changes nothing
    again = await WhatIfRun.objects.aget(pk=run.pk)
    assert again.result == stored.result and again.finished_at == stored.finished_at


def test_a_cancel_stops_a_running_run_before_its_next_split(make_topology, record, operator, monkeypatch):
    topology = make_topology(budget=4)
    record(topology)
    run = services.whatif_run_create(topology=topology, user=operator, window_seconds=300)
    replayed = []

    def one_split(replay, split):  # the first split is asked to stop while it is simulated
        replayed.append(split)
        services.whatif_run_cancel(run=run, actor=operator)
        return {
            "prefill": split[0],
            "decode": split[1],
            "attainment": 1.0,
            "ttft_attainment": 1.0,
            "tbt_attainment": 1.0,
            "goodput_rps": 1.0,
            "failed": 0,
        }

    monkeypatch.setattr(simulation, "replay_split", one_split)
    services.whatif_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert replayed == [(1, 3)] and run.state == WhatIfState.CANCELLED
    assert run.step == "cancelled after 1 of 3 splits" and run.result["incomplete"] is True
    with pytest.raises(Conflict, match="already cancelled"):
        services.whatif_run_cancel(run=run, actor=operator)
    queued = services.whatif_run_create(topology=topology, user=operator, window_seconds=300)
    assert services.whatif_run_cancel(run=queued, actor=operator).state == WhatIfState.CANCELLED
    services.whatif_run_execute(run_id=queued.pk)  # a cancelled run is never started
    queued.refresh_from_db()
    assert queued.started_at is None and queued.step.startswith("cancelled by")


def test_one_active_run_per_topology_and_two_per_person(make_topology, operator):
    first, second, third = (make_topology(budget=4) for _ in range(3))
    run = services.whatif_run_create(topology=first, user=operator, window_seconds=300)
    with pytest.raises(Conflict, match=f"what-if #{run.pk} of this topology is queued"):
        services.whatif_run_create(topology=first, user=operator, window_seconds=300)
    services.whatif_run_create(topology=second, user=operator, window_seconds=300)
    with pytest.raises(services.TooMany, match=r"you have 2 what-if runs queued or running \(#") as refused:
        services.whatif_run_create(topology=third, user=operator, window_seconds=300)
    assert refused.value.status_code == 429
    WhatIfRun.objects.filter(pk=run.pk).update(state=WhatIfState.SUCCEEDED)
    assert services.whatif_run_create(topology=third, user=operator, window_seconds=300).state == "queued"
    # A run whose job was lost stops holding the limit once it is stale.
    lost = WhatIfRun.objects.get(topology=second)
    WhatIfRun.objects.filter(pk=lost.pk).update(created_at=timezone.now() - services.STALE_RUNNING * 2)
    assert services.whatif_run_create(topology=second, user=operator, window_seconds=300).state == "queued"
    lost.refresh_from_db()
    assert lost.state == WhatIfState.FAILED and "its job was lost" in lost.error


def test_no_recorded_traffic_fails_the_run_saying_so(make_topology, operator):
    topology = make_topology(budget=4)
    run = services.whatif_run_create(topology=topology, user=operator, window_seconds=300)
    services.whatif_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == WhatIfState.FAILED and run.error == "no recorded traffic in this window"


def test_bad_windows_and_splits_are_field_errors(make_topology, operator):
    topology = make_topology(budget=4)
    cases = [
        ({"window_seconds": 30}, "window_seconds", "give 60 to 86400 seconds"),
        ({"window_seconds": 300, "end": 4e201}, "end", "after now"),
        ({"window_seconds": 300, "end": float("nan")}, "end", "Unix time"),
        ({"window_seconds": 300, "splits": [(3, 3)]}, "splits", "3P/3D not within the budget"),
    ]
    for kwargs, field, words in cases:
        with pytest.raises(DomainError) as refused:
            services.whatif_run_create(topology=topology, user=operator, **kwargs)
        assert refused.value.status_code == 400 and words in refused.value.fields[field][0], kwargs
    assert not WhatIfRun.objects.exists()
