"""Deployments finished by hand (no worker), for the rollback tests: a state, and the topology that runs."""

from __future__ import annotations

from deployments.models import Deployment, Kind, State
from deployments.services import deployment_start
from topologies.models import Topology
from topologies.services import topology_update


def finish_as(topology, operator, state: str = State.SUCCEEDED, kind: str = Kind.DEPLOY) -> Deployment:
    topology = Topology.objects.get(pk=topology.pk)
    job = deployment_start(topology=topology, actor=operator, source_ip=None, kind=kind)
    Deployment.objects.filter(pk=job.pk).update(
        state=state, error="" if state == State.SUCCEEDED else "image pull failed; rolled back"
    )
    if state == State.SUCCEEDED:
        Topology.objects.filter(pk=topology.pk).update(deployed_revision=job.revision)
    return job


def save_change(topology, operator, change, message: str = "change") -> Topology:
    topology = Topology.objects.get(pk=topology.pk)
    spec = dict(topology.spec)
    change(spec)
    return topology_update(topology=topology, spec=spec, actor=operator, message=message)


def new_image(tag: str):
    def change(spec):
        spec["image"] = spec["image"].rsplit(":", 1)[0] + ":" + tag

    return change


def new_ratio(prefill: int, decode: int):
    def change(spec):
        spec["roles"]["prefill"]["replicas"] = prefill
        spec["roles"]["decode"]["replicas"] = decode

    return change


def auto_rolled_back(topology, operator):
    """r1 and r2 ran; r3 (a broken image) failed and was rolled back: desired r3, running r2."""
    finish_as(topology, operator)
    save_change(topology, operator, new_image("v2"))
    finish_as(topology, operator)
    save_change(topology, operator, new_image("v3-broken"), message="broken build")
    finish_as(topology, operator, State.ROLLED_BACK)
    return Topology.objects.get(pk=topology.pk)
