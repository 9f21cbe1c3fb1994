"""Fixtures for deployment tests: a registered cluster and a topology built from a seed preset."""

from __future__ import annotations

import pytest


@pytest.fixture
def cluster(db):
    from clusters.models import Cluster

    return Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")


@pytest.fixture
def make_topology(db, cluster, admin_user):
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    def make(preset: str = "deepseek-ascend-mooncake", *, on=None, **overrides):
        return topology_create(cluster=on or cluster, spec=preset_spec(preset, **overrides), actor=admin_user)

    return make


@pytest.fixture
def topology(make_topology):
    return make_topology()
