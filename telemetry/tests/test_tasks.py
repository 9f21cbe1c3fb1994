from __future__ import annotations

import pytest

from telemetry import cache
from telemetry.models import LatestSnapshot
from telemetry.tasks import collect_all, collect_topology, rollup_and_prune


@pytest.fixture
def eager():
    app = collect_all.app
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


def test_collect_all_collects_only_deployed_topologies_and_says_why_a_cluster_failed(topology, eager):
    assert collect_all() == 0  # created, never deployed
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])
    assert collect_all() == 1
    latest = LatestSnapshot.objects.get(topology=topology).data
    assert latest["health"]["state"] == "down"
    assert latest["health"]["reasons"][0].startswith("cannot list the pods:")


def test_collect_topology_skips_while_another_collection_of_it_runs(topology):
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])
    with cache.collection_lock(topology.pk, seconds=10) as held:
        assert held
        assert collect_topology(topology.pk) is False
    assert not LatestSnapshot.objects.filter(topology=topology).exists()


def test_collecting_a_topology_that_is_gone_is_a_no_op(db):
    assert collect_topology(987654) is True
    assert not LatestSnapshot.objects.exists()


def test_rollup_and_prune_task_reports_what_it_did(db):
    assert set(rollup_and_prune()) == {"rolled", "points_pruned", "rollups_pruned", "series_removed"}
