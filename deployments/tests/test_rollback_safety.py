"""Rollbacks that cannot hurt: the default target is the newest revision that ran, a failed or never-deployed
one needs an explicit confirmation, the running revision can be kept after an automatic rollback (and the
problem then goes away), and ratio changes are folded and announced instead of flooding the choices."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from controlplane.api.errors import DomainError
from deployments.models import Deployment, Kind
from deployments.rollback_services import rollback_target, topology_keep_running, topology_rollback_start
from deployments.rollbacks import is_ratio_only, rollback_plan, spec_differences
from deployments.rollout import topology_rollout
from deployments.tests.rollback_helpers import finish_as, new_image, new_ratio, save_change
from topologies.models import Topology

pytestmark = pytest.mark.django_db


def test_default_target_is_the_newest_that_ran_never_the_failed_one(after_auto_rollback):
    plan = rollback_plan(after_auto_rollback)
    assert (plan.running, plan.desired, plan.default, plan.keep_running) == (2, 3, 1, True)
    r3 = plan.candidate(3)
    assert r3 is not None and not r3.known_good and r3.outcome.startswith("its last deploy failed: ")
    assert "image pull failed" in r3.outcome
    assert rollback_target(topology=after_auto_rollback, number=None).number == 1


def test_a_failed_revision_needs_an_explicit_confirmation(after_auto_rollback, operator):
    r3 = after_auto_rollback.revisions.get(number=3)
    with pytest.raises(DomainError) as refused:
        topology_rollback_start(topology=after_auto_rollback, to_revision=r3, actor=operator, source_ip=None)
    assert refused.value.code == "untested_revision" and "allow_untested" in refused.value.fields
    assert "revision 3 never ran successfully" in refused.value.message
    assert not Deployment.objects.filter(kind=Kind.ROLLBACK).exists()
    job = topology_rollback_start(
        topology=after_auto_rollback, to_revision=r3, actor=operator, source_ip=None, allow_untested=True
    )
    assert job.params == {"from_revision": 2, "untested": True}


def test_keeping_the_running_revision_clears_the_problem_and_is_audited(after_auto_rollback, operator):
    assert topology_rollout(after_auto_rollback)["problem"]
    kept = topology_keep_running(topology=after_auto_rollback, actor=operator, source_ip="10.0.0.9")
    assert kept.current_revision.number == 2 and kept.spec["image"].endswith(":v2")
    rollout = topology_rollout(Topology.objects.get(pk=kept.pk))
    assert rollout["state"] == "in_sync" and not rollout["problem"]
    assert rollout["message"] == "revision 2 is running; deploy of revision 3 failed and was set aside"
    event = AuditEvent.objects.get(action="topology.keep_running")
    assert event.detail == {"kept": 2, "dropped": 3} and event.actor_label == operator.username
    assert not Deployment.objects.filter(kind=Kind.ROLLBACK).exists()  # nothing deployed
    with pytest.raises(DomainError, match="already the desired revision"):
        topology_keep_running(topology=kept, actor=operator, source_ip=None)


def test_keeping_needs_something_running(topology, operator):
    with pytest.raises(DomainError, match="nothing is running"):
        topology_keep_running(topology=topology, actor=operator, source_ip=None)


def test_ratio_changes_fold_into_one_choice_and_a_rollback_says_it_undoes_them(topology, operator):
    finish_as(topology, operator)  # r1 1P/1D
    save_change(topology, operator, new_image("v2"))
    finish_as(topology, operator)  # r2
    for prefill, decode in ((2, 1), (2, 2), (3, 1), (1, 3)):  # four ratio moves: r3..r6, each ran
        save_change(topology, operator, new_ratio(prefill, decode), message="scale")
        finish_as(topology, operator, kind=Kind.SCALE)
    plan = rollback_plan(Topology.objects.get(pk=topology.pk))
    assert plan.running == 6
    numbers = [c.number for c in plan.candidates]
    assert numbers == [5, 2, 1], numbers  # r3 and r4 folded into r5, the newest ratio move that ran
    assert plan.candidate(5).folded == (4, 3) and plan.candidate(5).ratio == "3P/1D"
    undo = plan.candidate(2).differences  # same image: only the ratio differs, and that is said
    assert len(undo) == 1 and undo[0].startswith("P:D ratio 1P/3D → ")
    assert undo[0].endswith(": this undoes the ratio change made since (scale or rebalancing)")


def test_pure_ratio_and_differences():
    base = {"image": "a:1", "roles": {"prefill": {"replicas": 1, "args": ["x"]}, "decode": {"replicas": 1}}}
    scaled = {**base, "roles": {"prefill": {"replicas": 2, "args": ["x"]}, "decode": {"replicas": 1}}}
    other = {**base, "image": "a:2"}
    assert is_ratio_only(base, scaled) and not is_ratio_only(base, other) and not is_ratio_only(None, base)
    assert spec_differences(scaled, other) == [
        "P:D ratio 2P/1D → 1P/1D: this undoes the ratio change made since (scale or rebalancing)",
        "image: a:1 → a:2",
    ]


def test_the_revisions_list_folds_ratio_changes_behind_the_newest(client, topology, operator):
    finish_as(topology, operator)
    for prefill, decode in ((2, 1), (2, 2), (3, 1)):  # r2..r4: ratio moves
        save_change(topology, operator, new_ratio(prefill, decode), message="scale")
        finish_as(topology, operator, kind=Kind.SCALE)
    save_change(topology, operator, new_image("v5"), message="new build")  # r5: desired, not deployed
    client.force_login(operator)
    page = client.get(f"/topologies/{topology.pk}/").content.decode()
    assert 'data-folded="2"' in page and "Show 2 folded ratio changes " in page
    assert '<tr data-revision="3" class="ratio-folded">' in page  # behind r4, the newest of the run
    assert '<tr data-revision="2" class="ratio-folded">' in page
    assert '<tr data-revision="4">' in page and "ratio 3P/1D" in page  # running: never folded
    assert '<tr data-revision="5">' in page and '<tr data-revision="1">' in page
