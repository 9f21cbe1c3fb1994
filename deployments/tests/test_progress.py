"""Readiness: workloads must report the new generation rolled out; pods count by role and template."""

from __future__ import annotations

from dataclasses import dataclass, field

from deployments.plan import PodSet, expected_pods, pod_sets, template_hashes
from deployments.progress import pods_of, ready_pods, workload_progress
from topologies.render import render
from topologies.tests.conftest import spec_of

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pd-decode"}}
SERVING = {
    "apiVersion": "workload.serving.volcano.sh/v1alpha1",
    "kind": "ModelServing",
    "metadata": {"name": "pd"},
}


def _live(generation: int, want: int, **status: object) -> dict:  # type: ignore[type-arg]
    return {"metadata": {"generation": generation}, "spec": {"replicas": want}, "status": status}


@dataclass(frozen=True)
class Pod:
    labels: dict[str, str] = field(default_factory=dict)
    ready: bool = True
    deletion_pending: bool = False


def _pod(role: str, digest: str, *, ready: bool = True, deleting: bool = False) -> Pod:
    return Pod({"tandem.io/role": role, "tandem.io/template-hash": digest}, ready, deleting)


def test_deployment_is_done_when_the_new_generation_is_observed_and_every_replica_updated_and_ready():
    done = workload_progress(
        DEPLOYMENT,
        _live(3, 2, observedGeneration=3, replicas=2, updatedReplicas=2, readyReplicas=2),
    )
    assert done.done and done.text == ""


def test_deployment_whose_controller_has_not_seen_the_new_spec_is_not_done_even_with_ready_pods():
    stale = workload_progress(
        DEPLOYMENT, _live(4, 2, observedGeneration=3, replicas=2, updatedReplicas=2, readyReplicas=2)
    )
    assert not stale.done
    assert "has not seen generation 4" in stale.text and "Deployment/pd-decode" in stale.text


def test_deployment_with_old_replicas_left_or_new_ones_not_ready_is_not_done():
    surge = workload_progress(
        DEPLOYMENT, _live(2, 2, observedGeneration=2, replicas=3, updatedReplicas=2, readyReplicas=3)
    )
    starting = workload_progress(
        DEPLOYMENT, _live(2, 2, observedGeneration=2, replicas=2, updatedReplicas=2, readyReplicas=1)
    )
    assert not surge.done and "3 running" in surge.text
    assert not starting.done and "2/2 replicas updated, 1 ready" in starting.text


def test_deployment_scaled_to_zero_is_done_with_an_empty_status():
    assert workload_progress(DEPLOYMENT, _live(2, 0, observedGeneration=2)).done


def test_a_workload_not_created_yet_is_not_done():
    missing = workload_progress(DEPLOYMENT, None)
    assert not missing.done and "does not exist yet" in missing.text


def test_model_serving_counts_serving_groups_and_revisions():
    done = workload_progress(
        SERVING,
        _live(
            2,
            1,
            observedGeneration=2,
            replicas=1,
            updatedReplicas=1,
            availableReplicas=1,
            currentRevision="a",
            updateRevision="a",
        ),
    )
    rolling = workload_progress(
        SERVING,
        _live(
            2,
            1,
            observedGeneration=2,
            replicas=1,
            updatedReplicas=1,
            availableReplicas=1,
            currentRevision="a",
            updateRevision="b",
        ),
    )
    unavailable = workload_progress(
        SERVING, _live(2, 1, observedGeneration=2, replicas=1, updatedReplicas=0, availableReplicas=1)
    )
    assert done.done
    assert not rolling.done and "rolling from a to b" in rolling.text
    assert not unavailable.done and "0/1 serving groups updated" in unavailable.text


def test_pods_count_per_role_and_template_up_to_what_the_revision_expects():
    sets = [PodSet("prefill", "p1", 1), PodSet("decode", "d1", 2)]
    pods = [
        _pod("prefill", "p1"),
        _pod("prefill", "p0"),  # the old template, still serving
        _pod("decode", "d1"),
        _pod("decode", "d1", ready=False),
        _pod("decode", "d1", deleting=True),
    ]
    assert ready_pods(pods, sets) == 2
    assert len(pods_of(pods, sets)) == 3
    assert ready_pods([*pods, _pod("prefill", "p1")], sets) == 2  # surplus does not count twice


def test_pod_sets_follow_role_templates_and_replicas():
    one = render(spec_of("qwen-gpu-nixl", backend="deployments"), topology_id=3, revision=1)
    sets = pod_sets(one)
    assert [(s.role, s.count) for s in sets] == [("prefill", 1), ("decode", 1), ("router", 1)]
    assert sum(s.count for s in sets) == expected_pods(one)
    hashes = template_hashes(one)
    kthena = render(spec_of("qwen-gpu-nixl"), topology_id=3, revision=2)
    assert set(template_hashes(kthena)) == {"prefill", "decode"}
    assert all(len(h) == 10 for h in hashes.values())


def test_revisions_rendered_before_template_hashes_find_their_pods_by_revision_label():
    [legacy] = pod_sets(
        [
            {
                "kind": "Deployment",
                "metadata": {"name": "old-decode"},
                "spec": {
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": {"tandem.io/role": "decode", "tandem.io/revision": "4"}}
                    },
                },
            }
        ]
    )
    assert legacy.matches({"tandem.io/role": "decode", "tandem.io/revision": "4"})
    assert not legacy.matches({"tandem.io/role": "decode", "tandem.io/revision": "5"})
    assert not PodSet("decode", "", 1).matches({"tandem.io/role": "decode"})
