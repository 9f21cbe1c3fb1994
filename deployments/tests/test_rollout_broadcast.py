"""A finished deployment tells the Overview its topology's rollout state, so a failed deploy becomes a
problem there without a reload."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from controlplane.broadcast import overview_group
from deployments.job import Job
from deployments.models import Deployment, State
from deployments.services import deployment_start


@pytest.mark.django_db(transaction=True)
async def test_a_failed_deploy_reaches_the_overview_as_a_problem(topology, operator):
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(overview_group(), channel)

    def fail() -> int:
        deployment = deployment_start(topology=topology, actor=operator, source_ip=None)
        Deployment.objects.filter(pk=deployment.pk).update(claimed_by="t", state=State.APPLYING)
        job = Job(deployment.pk, "t")
        job.move(State.FAILED, "Failed: image cannot be pulled")
        return deployment.pk

    try:
        await sync_to_async(fail)()
        while True:
            payload = (await asyncio.wait_for(layer.receive(channel), 5))["payload"]
            if payload.get("kind") == "rollout":
                break
        assert payload["topology_id"] == topology.pk
        assert payload["state"] == "failed" and payload["problem"] is True
        assert payload["message"] == "deploy of revision 1 failed; nothing is running"
    finally:
        await layer.group_discard(overview_group(), channel)
