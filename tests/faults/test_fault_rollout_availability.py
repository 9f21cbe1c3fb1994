"""A rollout that would take a role down: plain Deployments surge first (the old pod serves until the new
one is Ready, even when the new one never becomes Ready); Kthena's ModelServing, which has no surge, keeps
the other instances of a multi-replica role serving, and preflight says before the deploy when a
one-replica role will be unavailable — or, for Deployments, when there is no room for the surge pod."""

from __future__ import annotations

import threading

import pytest

import kube
from deployments.models import State
from deployments.tests.sandbox_helpers import deploy_now
from kube.labels import ROLE, topology_selector
from tests.faults.sandbox_fixtures import *  # noqa: F403
from topologies.preflight_facts import ClusterFacts, NodeFacts
from topologies.preflight_rollout import check_rollout_availability
from topologies.presets import preset_spec
from topologies.render import render
from topologies.spec import TopologySpec

pytestmark = pytest.mark.usefixtures("fast_deploys")


class ReadySampler:
    """Counts Ready pods of one role every 100 ms while a deploy runs (cluster reads only, no database)."""

    def __init__(self, conn, topology, role: str) -> None:
        self.conn, self.namespace, self.selector, self.role = conn, topology.namespace, topology, role
        self.counts: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        selector = topology_selector(self.selector.pk)
        while not self._stop.wait(0.1):
            pods = kube.list_pods(self.conn, self.namespace, selector)
            self.counts.append(
                sum(1 for p in pods if p.labels.get(ROLE) == self.role and p.ready and not p.deletion_pending)
            )

    def __enter__(self) -> ReadySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _update(topology, operator, **changes):
    from topologies.services import topology_update

    spec = {**topology.spec, **changes}
    return topology_update(topology=topology, spec=spec, actor=operator, message="test change")


def _preflight_codes(topology):
    from topologies.services import topology_preflight

    topology.refresh_from_db()
    return {f.code: f for f in topology_preflight(topology=topology)}


def test_plain_deployment_surges_so_the_only_decode_pod_serves_through_a_bad_rollout(
    new_topology, operator, conn
):
    topology = new_topology("qwen-gpu-nixl", backend="deployments")
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    _update(topology, operator, image=topology.spec["image"] + "-broken")
    assert "rollout_no_surge_room" not in _preflight_codes(topology)  # the GPUs have room for a surge pod
    with ReadySampler(conn, topology, "decode") as sampler:
        deployment = deploy_now(topology, operator)
    assert deployment.state == State.ROLLED_BACK, (deployment.error, deployment.diagnosis)
    assert len(sampler.counts) > 5 and min(sampler.counts) >= 1, sampler.counts


def test_kthena_one_replica_role_is_announced_as_unavailable_before_the_rollout(new_topology, operator, conn):
    topology = new_topology("qwen-gpu-nixl")
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    _update(topology, operator, image=topology.spec["image"] + "-v2")
    found = _preflight_codes(topology)
    assert found["rollout_role_unavailable"].field in ("roles.decode.replicas", "roles.prefill.replicas")
    assert "will be unavailable during this rollout" in found["rollout_role_unavailable"].message
    deployment = deploy_now(topology, operator)
    preflight_step = next(
        s.message for s in deployment.steps.all() if s.message.startswith("Preflight passed")
    )
    assert "decode will be unavailable during this rollout" in preflight_step


def test_kthena_multi_replica_role_keeps_serving_during_a_rollout(new_topology, operator, conn):
    topology = new_topology("qwen-gpu-nixl")
    spec = dict(topology.spec)
    spec["roles"] = {**spec["roles"], "decode": {**spec["roles"]["decode"], "replicas": 2}}
    from topologies.services import topology_update

    topology_update(topology=topology, spec=spec, actor=operator, message="two decode")
    assert deploy_now(topology, operator).state == State.SUCCEEDED
    _update(topology, operator, image=topology.spec["image"] + "-v2")
    found = _preflight_codes(topology)
    assert all("decode" not in f.field for f in found.values() if f.code == "rollout_role_unavailable")
    with ReadySampler(conn, topology, "decode") as sampler:
        deployment = deploy_now(topology, operator)
    assert deployment.state == State.SUCCEEDED, (deployment.error, deployment.diagnosis)
    assert min(sampler.counts) >= 1, sampler.counts  # maxUnavailable 1 of 2: one decode pod always serves


def _spec(preset: str, **overrides) -> TopologySpec:
    return TopologySpec.from_dict(preset_spec(preset, **overrides))


def test_no_room_for_a_surge_pod_is_said_before_the_deploy():
    deployed = _spec("qwen-gpu-nixl", backend="deployments")
    new = _spec("qwen-gpu-nixl", backend="deployments", image=deployed.image + "-v2")
    full = NodeFacts(name="n1", allocatable={"nvidia.com/gpu": 2}, in_use={"nvidia.com/gpu": 2})
    findings = check_rollout_availability(
        new,
        ClusterFacts(nodes=(full,)),
        rendered=render(new, topology_id=0, revision=0),
        deployed=deployed,
        deployed_rendered=render(deployed, topology_id=0, revision=0),
    )
    assert {f.code for f in findings} == {"rollout_no_surge_room"}
    assert {f.field for f in findings} == {
        "roles.prefill.accelerator_count",
        "roles.decode.accelerator_count",
    }
    room = NodeFacts(name="n1", allocatable={"nvidia.com/gpu": 4}, in_use={"nvidia.com/gpu": 2})
    assert (
        check_rollout_availability(
            new,
            ClusterFacts(nodes=(room,)),
            rendered=render(new, topology_id=0, revision=0),
            deployed=deployed,
            deployed_rendered=render(deployed, topology_id=0, revision=0),
        )
        == []
    )


def test_a_scale_or_a_first_deploy_replaces_nothing_and_warns_nothing():
    deployed = _spec("qwen-gpu-nixl")
    base = preset_spec("qwen-gpu-nixl")
    roles = {**base["roles"], "decode": {**base["roles"]["decode"], "replicas": 2}}
    scaled = TopologySpec.from_dict({**base, "roles": roles})
    rendered = render(scaled, topology_id=0, revision=0)
    first = check_rollout_availability(
        scaled, ClusterFacts(), rendered=rendered, deployed=None, deployed_rendered=[]
    )
    assert first == []
    scale = check_rollout_availability(
        scaled,
        ClusterFacts(),
        rendered=rendered,
        deployed=deployed,
        deployed_rendered=render(deployed, topology_id=0, revision=0),
    )
    assert scale == []  # replicas are not part of a pod template: nothing is replaced
