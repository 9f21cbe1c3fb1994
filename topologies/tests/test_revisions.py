"""Revisions: numbered 1..n per topology, immutable, created only by real changes, diffable."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from topologies.models import Revision, RevisionImmutable
from topologies.presets import preset_spec
from topologies.selectors import revision_diff
from topologies.services import topology_create, topology_update

pytestmark = pytest.mark.django_db


def _scaled(replicas: int) -> dict:  # type: ignore[type-arg]
    spec = preset_spec("qwen-sglang-mooncake")
    spec["roles"]["decode"]["replicas"] = replicas
    return spec


def test_revisions_number_from_one_per_topology(cluster, operator) -> None:
    first = topology_create(cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    other = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=operator)
    topology_update(topology=first, spec=_scaled(2), actor=operator, message="two")
    topology_update(topology=first, spec=_scaled(3), actor=operator, message="three")
    first.refresh_from_db()
    assert list(first.revisions.values_list("number", flat=True)) == [3, 2, 1]
    assert first.current_revision is not None and first.current_revision.number == 3
    assert list(other.revisions.values_list("number", flat=True)) == [1]


def test_rendered_manifests_carry_revision_label(cluster, operator) -> None:
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    topology_update(topology=topology, spec=_scaled(2), actor=operator)
    second = Revision.objects.get(topology=topology, number=2)
    assert {o["metadata"]["labels"]["tandem.io/revision"] for o in second.manifests} == {"2"}
    assert {o["metadata"]["labels"]["tandem.io/topology"] for o in second.manifests} == {str(topology.pk)}


def test_unchanged_spec_creates_no_revision(cluster, operator) -> None:
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    topology_update(topology=topology, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    # Defaults written out explicitly are the same spec too.
    topology_update(topology=topology, spec=dict(topology.spec), actor=operator)
    assert topology.revisions.count() == 1


def test_revision_cannot_be_changed(cluster, operator) -> None:
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    revision = topology.revisions.get()
    revision.message = "rewritten"
    with pytest.raises(RevisionImmutable):
        revision.save()
    with pytest.raises(RevisionImmutable):
        Revision.objects.filter(pk=revision.pk).update(message="rewritten")
    assert Revision.objects.get(pk=revision.pk).message == "created"


def test_denormalised_fields_follow_the_spec(cluster, operator) -> None:
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    spec = _scaled(1)
    spec["slo"] = {"ttft_ms": 250, "tbt_ms": 20}
    topology_update(topology=topology, spec=spec, actor=operator)
    topology.refresh_from_db()
    assert (topology.slo_ttft_ms, topology.slo_tbt_ms, topology.engine, topology.kv_connector) == (
        250,
        20,
        "sglang",
        "mooncake",
    )


def test_changes_are_audited(cluster, operator) -> None:
    topology = topology_create(
        cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator, source_ip="127.0.0.9"
    )
    topology_update(topology=topology, spec=_scaled(2), actor=operator, message="scale")
    actions = list(AuditEvent.objects.filter(target_id=str(topology.pk)).values_list("action", "source_ip"))
    assert ("topology.create", "127.0.0.9") in actions and ("topology.update", None) in actions


def test_diff_is_stable_and_shows_only_changes(cluster, operator) -> None:
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-sglang-mooncake"), actor=operator)
    topology_update(topology=topology, spec=_scaled(2), actor=operator)
    one, two = (
        Revision.objects.get(topology=topology, number=1),
        Revision.objects.get(topology=topology, number=2),
    )
    diff = revision_diff(one, two)
    assert diff.startswith("--- revision 1\n+++ revision 2\n")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    assert sorted(changed) == sorted(
        [
            "-      replicas: 1",
            "+      replicas: 2",
            *["-    tandem.io/revision: '1'" for _ in range(3)],
            *["+    tandem.io/revision: '2'" for _ in range(3)],
        ]
    ), diff  # the pod templates are untouched: scaling decode restarts no pod
    assert revision_diff(one, one) == ""
