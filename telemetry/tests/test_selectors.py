from __future__ import annotations

import time

from audit.services import audit_record
from telemetry import selectors
from telemetry.services import telemetry_store


def deploy(topology):
    topology.deployed_revision = topology.current_revision
    topology.save(update_fields=["deployed_revision"])


def test_overview_lists_every_topology_with_problems_first(topology, cluster, admin_user, build):
    from topologies.presets import preset_spec
    from topologies.services import topology_create

    broken = topology_create(
        cluster=cluster, spec=preset_spec("qwen-gpu-nixl", name="qwen-broken"), actor=admin_user
    )
    idle = topology_create(
        cluster=cluster, spec=preset_spec("qwen-gpu-nixl", name="qwen-idle"), actor=admin_user
    )
    deploy(topology)
    deploy(broken)
    now = time.time()
    healthy, _, _ = build(topology.pk, now)
    telemetry_store(topology=topology, snapshot=healthy, actions={})
    down, _, _ = build(broken.pk, now, link_status="LLM_WAIT_PROCESS_TIMEOUT")
    telemetry_store(topology=broken, snapshot=down, actions={})

    rows = selectors.overview_rows()
    assert [r["name"] for r in rows] == ["qwen-broken", topology.name, "qwen-idle"]
    first = rows[0]
    assert first["health"]["state"] == "down" and first["links_down"] == 1
    assert first["cluster_name"] == cluster.name and first["pods"] == 2
    assert rows[1]["health"]["state"] == "healthy" and rows[1]["hit_rate"] is None
    assert rows[2]["deployed"] is False and rows[2]["health"]["reasons"] == ["not deployed"]
    assert idle.pk == rows[2]["topology_id"]
    from clusters.models import Cluster

    Cluster.objects.create(name="empty-lab", auth_method="token", server="http://127.0.0.1:8")
    clusters = selectors.overview_clusters(rows)
    assert [(c["name"], c["topologies"], c["problems"]) for c in clusters] == [
        (cluster.name, 3, 1),
        ("empty-lab", 0, 0),
    ]


def test_events_name_deploys_and_alerts_in_words(topology, admin_user):
    audit_record(action="topology.deploy", actor=admin_user, target=topology, detail={"revision": 3})
    audit_record(action="topology.rollback", actor=admin_user, target=topology, detail={"revision": 2})
    audit_record(action="topology.switch_role", actor=admin_user, target=topology, detail={})
    audit_record(
        action="telemetry.alert_raised", target=topology, detail={"message": "TTFT p95 900 ms is above"}
    )
    audit_record(action="topology.deploy_policy", actor=admin_user, target=topology, detail={})
    events = selectors.recent_events(topology_id=topology.pk, since=time.time() - 60)
    assert [(e["kind"], e["text"]) for e in events] == [
        ("deploy", f"deploy of revision 3 by {admin_user.username}"),
        ("deploy", f"roll back to revision 2 by {admin_user.username}"),
        ("role_change", f"switch role by {admin_user.username}"),
        ("alert_raised", "TTFT p95 900 ms is above"),
    ]


def test_auto_step_gives_round_steps_of_about_300_buckets(settings):
    settings.TELEMETRY_INTERVAL_SECONDS = 2
    assert selectors.auto_step(300) == 2
    assert selectors.auto_step(3600) == 15
    assert selectors.auto_step(86400) == 300
