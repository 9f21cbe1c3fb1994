"""Preflight refuses a model name another topology already serves through the same router (Kthena: one
router per cluster; the plain backend: one per namespace), naming that topology and the fix, and warns when
Tandem's gateway would keep sending the name to the other one. A deploy that preflight blocks goes ahead
only with a reason, which is audited."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from deployments.models import Deployment
from deployments.services import deployment_start
from topologies.models import Topology
from topologies.preflight_names import NameClaim, check_model_names
from topologies.presets import preset_spec
from topologies.services import spec_preflight, topology_create
from topologies.tests.conftest import spec_of

ROUTED = "deepseek-ai/DeepSeekV2"  # the preset's ModelRoute name
GATEWAY = ROUTED  # the name Tandem's gateway answers to: the same in the preset


def _claim(**kw) -> NameClaim:  # type: ignore[no-untyped-def]
    base = dict(
        topology_id=7,
        name="demo",
        cluster_id=1,
        cluster_name="lab",
        namespace="demo",
        backend="kthena",
        routed_name=ROUTED,
        gateway_name=GATEWAY,
    )
    return NameClaim(**{**base, **kw})


def _spec(**kw):  # type: ignore[no-untyped-def]
    spec = spec_of("deepseek-ascend-mooncake", namespace="imported", **kw)
    assert (spec.routing.model_name, spec.model_name) == (ROUTED, GATEWAY)
    return spec


def test_kthena_one_router_per_cluster_blocks_the_same_name_in_another_namespace() -> None:
    (finding,) = check_model_names(_spec(), cluster_id=1, topology_id=None, others=[_claim()])
    assert (finding.level, finding.code, finding.field) == ("error", "model_name_taken", "routing.model_name")
    assert finding.message == (
        f"topology demo (lab, namespace demo) already serves model {ROUTED} through the Kthena router of "
        "cluster lab; both would answer to the same name and the router would pick one"
    )
    assert finding.fix == "give this topology another model name (routing.model_name), or remove demo first"


def test_plain_backend_routers_are_per_namespace() -> None:
    spec = _spec(backend="deployments")
    other = _claim(backend="deployments")
    (finding,) = check_model_names(spec, cluster_id=1, topology_id=None, others=[other])
    assert (finding.level, finding.code) == ("warning", "model_name_shared_gateway")
    assert "the gateway keeps sending" in finding.message and "which claimed it first" in finding.message
    same_namespace = _claim(backend="deployments", namespace="imported")
    assert [
        f.code for f in check_model_names(spec, cluster_id=1, topology_id=None, others=[same_namespace])
    ] == ["model_name_taken"]


def test_another_cluster_shares_only_the_gateway_and_the_topology_itself_is_no_conflict() -> None:
    other_cluster = _claim(cluster_id=2, cluster_name="far")
    assert [
        f.level for f in check_model_names(_spec(), cluster_id=1, topology_id=None, others=[other_cluster])
    ] == ["warning"]
    assert check_model_names(_spec(), cluster_id=1, topology_id=7, others=[_claim()]) == []
    assert (
        check_model_names(
            _spec(), cluster_id=1, topology_id=None, others=[_claim(routed_name="x", gateway_name="x")]
        )
        == []
    )


@pytest.mark.django_db
def test_preflight_reads_the_running_topologies(admin_user, operator) -> None:
    from clusters.models import Cluster

    lab = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    demo = topology_create(
        cluster=lab,
        spec=preset_spec("deepseek-ascend-mooncake", namespace="demo"),
        actor=admin_user,
    )
    spec = preset_spec("deepseek-ascend-mooncake", namespace="imported", name="imported")
    assert "model_name_taken" not in {
        f.code for f in spec_preflight(cluster=lab, spec=spec)
    }  # demo never ran
    Topology.objects.filter(pk=demo.pk).update(deployed_revision=demo.current_revision)
    findings = spec_preflight(cluster=lab, spec=spec)
    taken = next(f for f in findings if f.code == "model_name_taken")
    assert taken.blocking and "topology deepseek-v2-lite (lab, namespace demo)" in taken.message
    assert spec_preflight(cluster=lab, spec=demo.spec, topology=demo)[0].code == "cluster_unreachable"


@pytest.mark.django_db
def test_a_deploy_past_preflight_needs_a_reason_and_is_audited(admin_user, operator) -> None:
    from clusters.models import Cluster

    lab = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    topology = topology_create(cluster=lab, spec=preset_spec("deepseek-ascend-mooncake"), actor=admin_user)
    job = deployment_start(
        topology=topology, actor=operator, source_ip="10.1.1.1", override_preflight="  demo is removed next  "
    )
    assert job.params == {"preflight_override": "demo is removed next"}
    event = AuditEvent.objects.get(action="topology.preflight_override")
    assert event.detail == {"deployment": job.pk, "revision": 1, "reason": "demo is removed next"}
    Deployment.objects.filter(pk=job.pk).update(state="failed")
    plain = deployment_start(topology=topology, actor=operator, source_ip=None, override_preflight="   ")
    assert plain.params == {} and AuditEvent.objects.filter(action="topology.preflight_override").count() == 1


@pytest.mark.django_db
def test_api_deploy_override_is_named_and_a_blank_reason_is_no_override(
    api_client, admin_user, operator
) -> None:
    from clusters.models import Cluster

    lab = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    topology = topology_create(cluster=lab, spec=preset_spec("deepseek-ascend-mooncake"), actor=admin_user)
    api_client.force_authenticate(operator)
    url = f"/api/v1/topologies/{topology.pk}/deploy/"
    too_long = api_client.post(url, {"override_preflight": "x" * 301}, format="json")
    assert too_long.status_code == 400 and "override_preflight" in too_long.json()["error"]["fields"]
    response = api_client.post(url, {"override_preflight": "demo goes away tonight"}, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["params"] == {"preflight_override": "demo goes away tonight"}
    assert AuditEvent.objects.filter(action="topology.preflight_override").count() == 1


@pytest.mark.django_db
def test_page_and_api_say_which_topology_the_gateway_sends_a_shared_name_to(
    client, api_client, admin_user, operator
) -> None:
    from clusters.models import Cluster

    lab = Cluster.objects.create(name="lab", auth_method="token", server="http://127.0.0.1:9")
    far = Cluster.objects.create(name="far", auth_method="token", server="http://127.0.0.1:9")
    older = topology_create(
        cluster=lab, spec=preset_spec("deepseek-ascend-mooncake", name="demo"), actor=admin_user
    )
    newer = topology_create(
        cluster=far, spec=preset_spec("deepseek-ascend-mooncake", name="imported"), actor=admin_user
    )
    api_client.force_authenticate(operator)
    alone = api_client.get(f"/api/v1/topologies/{older.pk}/model-name/").json()
    assert alone["shared_with"] == [] and alone["served_by_id"] is None
    for t in (older, newer):
        Topology.objects.filter(pk=t.pk).update(deployed_revision=t.current_revision)
    here = api_client.get(f"/api/v1/topologies/{older.pk}/model-name/").json()
    assert here["served_here"] is True and here["shared_with"] == [{"id": newer.pk, "name": "imported"}]
    assert "it claimed the name first" in here["why"]
    there = api_client.get(f"/api/v1/topologies/{newer.pk}/model-name/").json()
    assert there["served_here"] is False and (there["served_by_id"], there["served_by_name"]) == (
        older.pk,
        "demo",
    )
    assert there["why"].startswith(
        f"The gateway sends {ROUTED} to topology demo, which claimed the name first"
    )
    client.force_login(operator)
    page = client.get(f"/topologies/{newer.pk}/").content.decode()
    assert 'data-sharing="served-elsewhere"' in page and "this topology gets no gateway requests" in page
