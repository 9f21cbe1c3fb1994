"""One state for every page: desired and running revision, a failed last attempt, never-deployed, and
the Overview's Problems that count them; rollbacks make their revision the desired one."""

from __future__ import annotations

import pytest

from deployments.models import Deployment, Kind, State
from deployments.rollback_services import topology_rollback_start
from deployments.rollout import ever_ran, topology_rollout
from deployments.services import deployment_start
from topologies.models import Topology
from topologies.presets import preset_spec
from topologies.services import topology_update

pytestmark = pytest.mark.django_db


def _finish(deployment: Deployment, state: str, *, runs: bool) -> None:
    Deployment.objects.filter(pk=deployment.pk).update(state=state)
    if runs:
        Topology.objects.filter(pk=deployment.topology_id).update(deployed_revision=deployment.revision)


def _r2(topology, operator):  # type: ignore[no-untyped-def]
    spec = preset_spec("deepseek-ascend-mooncake")
    spec["roles"]["decode"]["replicas"] = 2
    return topology_update(topology=topology, spec=spec, actor=operator)


def test_never_deployed_says_not_deployed(topology) -> None:
    rollout = topology_rollout(topology)
    assert (rollout["state"], rollout["message"], rollout["problem"]) == (
        "not_deployed",
        "not deployed",
        False,
    )
    assert ever_ran(topology) == set()


def test_a_failed_deploy_is_a_problem_naming_what_runs(topology, operator) -> None:
    _finish(deployment_start(topology=topology, actor=operator, source_ip=None), State.SUCCEEDED, runs=True)
    topology = _r2(topology, operator)
    failed = deployment_start(topology=topology, actor=operator, source_ip=None)
    _finish(failed, State.ROLLED_BACK, runs=False)
    rollout = topology_rollout(Topology.objects.get(pk=topology.pk))
    assert rollout["state"] == "failed" and rollout["problem"]
    assert rollout["message"] == "deploy of revision 2 failed; revision 1 is running"
    assert (rollout["desired"], rollout["running"]) == (2, 1)
    assert ever_ran(topology) == {1}


def test_running_other_than_desired_is_behind(topology, operator) -> None:
    _finish(deployment_start(topology=topology, actor=operator, source_ip=None), State.SUCCEEDED, runs=True)
    _r2(topology, operator)
    rollout = topology_rollout(Topology.objects.get(pk=topology.pk))
    assert rollout["state"] == "behind" and rollout["problem"]
    assert "running revision 1, desired revision 2" in rollout["message"]


def test_rollback_makes_its_revision_desired_and_refuses_the_running_one(topology, operator) -> None:
    _finish(deployment_start(topology=topology, actor=operator, source_ip=None), State.SUCCEEDED, runs=True)
    topology = _r2(topology, operator)
    _finish(deployment_start(topology=topology, actor=operator, source_ip=None), State.SUCCEEDED, runs=True)
    topology = Topology.objects.get(pk=topology.pk)
    r1 = topology.revisions.get(number=1)
    job = topology_rollback_start(topology=topology, to_revision=r1, actor=operator, source_ip=None)
    assert job.describe() == "rollback from revision 2 to revision 1"
    topology = Topology.objects.get(pk=topology.pk)
    assert topology.current_revision == r1 and topology.spec["roles"]["decode"]["replicas"] == 1
    _finish(job, State.SUCCEEDED, runs=True)
    from controlplane.api.errors import DomainError

    with pytest.raises(DomainError, match="already running"):
        topology_rollback_start(topology=topology, to_revision=r1, actor=operator, source_ip=None)


def test_overview_counts_failed_and_behind_and_keeps_never_deployed_quiet(client, viewer, topology, operator):
    client.force_login(viewer)
    page = client.get("/").content.decode()
    assert 'data-rollout="not_deployed"' in page and "Not deployed yet" in page
    assert "data-problem-count>0<" in page
    _finish(deployment_start(topology=topology, actor=operator, source_ip=None), State.FAILED, runs=False)
    page = client.get("/").content.decode()
    assert 'data-rollout="failed"' in page and "deploy of revision 1 failed; nothing is running" in page
    assert "data-problem-count>1<" in page


def test_panel_rollback_choices_leave_out_the_running_revision(client, operator, topology) -> None:
    _finish(deployment_start(topology=topology, actor=operator, source_ip=None), State.SUCCEEDED, runs=True)
    _r2(topology, operator)
    client.force_login(operator)
    page = client.get(f"/deployments/topology/{topology.pk}/panel/").content.decode()
    # Revision 2 is the desired one (Deploy deploys it); rolling back offers keeping what runs.
    assert '<option value="keep" selected>revision 1 (running): keep it</option>' in page
    assert '<option value="1"' not in page and '<option value="2"' not in page
    detail = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert 'data-badge="never"' in detail and 'data-badge="running"' in detail


def test_delete_asks_for_the_name_then_shows_the_removal(client, operator, topology) -> None:
    client.force_login(operator)
    confirm = client.get(f"/topologies/{topology.pk}/delete/").content.decode()
    assert f'Type <strong class="mono">{topology.name}</strong> to confirm' in confirm
    refused = client.post(f"/topologies/{topology.pk}/delete/", {"confirm_name": "nope"})
    assert refused.status_code == 400 and not Deployment.objects.filter(kind=Kind.DELETE).exists()
    started = client.post(f"/topologies/{topology.pk}/delete/", {"confirm_name": topology.name})
    job = Deployment.objects.get(kind=Kind.DELETE)
    assert started["Location"] == f"/topologies/removal/{job.pk}/"
    page = client.get(started["Location"]).content.decode()
    assert f'data-url="/api/v1/deployments/{job.pk}/"' in page and "Queued" in page


def test_viewer_cannot_delete(client, viewer, topology) -> None:
    client.force_login(viewer)
    assert client.get(f"/topologies/{topology.pk}/delete/").status_code == 403
    assert (
        client.post(f"/topologies/{topology.pk}/delete/", {"confirm_name": topology.name}).status_code == 403
    )
