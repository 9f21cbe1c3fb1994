"""Activity rows link to their targets (while they exist), show times as <time> for the browser's zone
with UTC on hover, and a rollback names the revision it left and the one it went to."""

from __future__ import annotations

import pytest

from audit.services import audit_record

pytestmark = pytest.mark.django_db


def test_rows_link_to_live_targets_and_read_rollbacks_in_words(client, admin_user):
    from clusters.models import Cluster
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    cluster = Cluster.objects.create(name="lab", auth_method="token", server="https://127.0.0.1:1")
    topology = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl"), actor=admin_user)
    audit_record(
        action="topology.rollback",
        actor=admin_user,
        target=topology,
        detail={"deployment": 4, "revision": 1, "from_revision": 3},
    )
    gone = topology_create(cluster=cluster, spec=preset_spec("qwen-gpu-nixl", name="gone"), actor=admin_user)
    gone_id = gone.pk
    gone.delete()
    client.force_login(admin_user)
    page = client.get("/activity/").content.decode()
    assert "rollback from revision 3 to revision 1" in page
    assert f'href="/topologies/{topology.pk}/"' in page and f'href="/clusters/{cluster.pk}/"' not in page
    assert f'href="/topologies/{gone_id}/"' not in page
    assert "<time data-local datetime=" in page and ' UTC">' in page
    assert 'When <span data-tz-name="short">(UTC)</span>' in page  # the browser's zone once scripted
