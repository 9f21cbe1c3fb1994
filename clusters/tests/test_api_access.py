"""The clusters API: roles, write-only credentials, field errors, filters, removal."""

from __future__ import annotations

import logging

import pytest

from audit.models import AuditEvent
from clusters.models import AuthMethod, Cluster
from clusters.tests.helpers import closed_port

pytestmark = pytest.mark.django_db
TOKEN = "sekret-token-0123456789abcdef"
CREDENTIAL_KEYS = {"token", "kubeconfig", "ca_bundle", "client_cert", "client_key"}


def _cluster(name="lab", **extra) -> Cluster:
    return Cluster.objects.create(
        name=name, auth_method=AuthMethod.TOKEN, server="http://127.0.0.1:1", token=TOKEN, **extra
    )


def test_viewer_reads_but_gets_403_on_writes(api_client, viewer):
    cluster = _cluster()
    api_client.force_authenticate(viewer)
    assert api_client.get("/api/v1/clusters/").status_code == 200
    assert api_client.get(f"/api/v1/clusters/{cluster.pk}/").status_code == 200
    assert (
        api_client.post(
            "/api/v1/clusters/", {"name": "x", "server": "http://127.0.0.1:1", "token": "t"}
        ).status_code
        == 403
    )
    assert api_client.patch(f"/api/v1/clusters/{cluster.pk}/", {"description": "x"}).status_code == 403
    assert api_client.delete(f"/api/v1/clusters/{cluster.pk}/").status_code == 403
    assert api_client.post(f"/api/v1/clusters/{cluster.pk}/check/").status_code == 403
    response = api_client.post(f"/api/v1/clusters/{cluster.pk}/test-connection/")
    assert response.status_code == 403
    assert "needs the operator role" in response.json()["error"]["message"]


def test_anonymous_is_refused(api_client):
    assert api_client.get("/api/v1/clusters/").status_code in (401, 403)


def test_credentials_never_come_back(api_client, admin_user, caplog):
    caplog.set_level(logging.DEBUG)
    api_client.force_authenticate(admin_user)
    port = closed_port()
    created = api_client.post(
        "/api/v1/clusters/",
        {"name": "lab", "server": f"http://127.0.0.1:{port}", "token": TOKEN, "allow_unreachable": True},
    )
    assert created.status_code == 201, created.content
    listed = api_client.get("/api/v1/clusters/")
    detail = api_client.get(f"/api/v1/clusters/{created.json()['id']}/")
    for response in (created, listed, detail):
        assert TOKEN not in response.content.decode()
    assert not CREDENTIAL_KEYS & set(detail.json())
    assert detail.json()["health_state"] == "unreachable"
    assert "connection refused" in detail.json()["last_error"]
    assert TOKEN not in caplog.text
    assert all(TOKEN not in str(e.detail) for e in AuditEvent.objects.all())
    assert AuditEvent.objects.filter(action="cluster.register").count() == 1


def test_unreachable_registration_is_a_field_error(api_client, admin_user):
    api_client.force_authenticate(admin_user)
    port = closed_port()
    response = api_client.post(
        "/api/v1/clusters/", {"name": "lab", "server": f"http://127.0.0.1:{port}", "token": "t"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unreachable"
    assert error["fields"]["server"] == [f"cannot reach http://127.0.0.1:{port}: connection refused"]


def test_list_filters_are_the_shared_filterset(api_client, viewer):
    _cluster("alpha", health_state="healthy")
    _cluster("beta", health_state="unreachable")
    api_client.force_authenticate(viewer)
    names = [
        c["name"] for c in api_client.get("/api/v1/clusters/?health_state=unreachable").json()["results"]
    ]
    assert names == ["beta"]
    names = [c["name"] for c in api_client.get("/api/v1/clusters/?q=alp").json()["results"]]
    assert names == ["alpha"]


def test_inventory_and_health_history_endpoints(api_client, viewer):
    from django.utils import timezone

    cluster = _cluster()
    cluster.nodes.create(
        name="n1",
        ready=True,
        accelerator_resource="nvidia.com/gpu",
        capacity=8,
        allocatable=8,
        in_use=3,
        accelerators={"nvidia.com/gpu": {"capacity": 8, "allocatable": 8, "in_use": 3}},
        seen=timezone.now(),
    )
    api_client.force_authenticate(viewer)
    body = api_client.get(f"/api/v1/clusters/{cluster.pk}/inventory/").json()
    assert body["accelerators"] == [
        {"resource": "nvidia.com/gpu", "nodes": 1, "capacity": 8, "allocatable": 8, "in_use": 3, "free": 5}
    ]
    assert body["nodes"][0]["free"] == 5
    assert api_client.get(f"/api/v1/clusters/{cluster.pk}/health-history/").status_code == 200


def test_admin_removes_a_cluster_and_it_is_audited(api_client, admin_user):
    cluster = _cluster()
    api_client.force_authenticate(admin_user)
    assert api_client.delete(f"/api/v1/clusters/{cluster.pk}/").status_code == 204
    assert not Cluster.objects.filter(pk=cluster.pk).exists()
    assert AuditEvent.objects.filter(action="cluster.delete").exists()


def test_rename_is_audited_and_credentials_stay(api_client, admin_user):
    cluster = _cluster()
    api_client.force_authenticate(admin_user)
    response = api_client.patch(
        f"/api/v1/clusters/{cluster.pk}/", {"name": "lab-2", "description": "GPU lab"}
    )
    assert response.status_code == 200, response.content
    cluster.refresh_from_db()
    assert (cluster.name, cluster.description, cluster.token) == ("lab-2", "GPU lab", TOKEN)
    assert AuditEvent.objects.filter(action="cluster.update").exists()


def _topology(cluster: Cluster, name: str = "ds-pd"):
    from topologies.models import Topology

    return Topology.objects.create(
        name=name,
        cluster=cluster,
        namespace="llm",
        model_name="deepseek",
        engine="vllm",
        image="vllm/vllm-openai",
        backend="kthena",
        kv_connector="mooncake",
        spec={},
        slo_ttft_ms=500,
        slo_tbt_ms=50,
    )


def test_removal_is_refused_while_topologies_run_on_it(api_client, admin_user):
    cluster = _cluster()
    _topology(cluster)
    api_client.force_authenticate(admin_user)
    response = api_client.delete(f"/api/v1/clusters/{cluster.pk}/")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "cluster_in_use"
    assert "ds-pd" in error["message"]
    assert "confirm" in error["fields"]
    assert Cluster.objects.filter(pk=cluster.pk).exists()


def test_confirmed_removal_starts_deleting_its_topologies_then_removes_the_cluster(api_client, admin_user):
    from deployments.models import Deployment, Kind

    cluster = _cluster()
    topology = _topology(cluster)
    api_client.force_authenticate(admin_user)
    response = api_client.delete(f"/api/v1/clusters/{cluster.pk}/?confirm=true")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "cluster_in_use"
    assert "removal of ds-pd has started" in error["message"]
    assert Deployment.objects.filter(topology=topology, kind=Kind.DELETE).count() == 1
    again = api_client.delete(f"/api/v1/clusters/{cluster.pk}/?confirm=true")
    assert again.status_code == 409
    assert "ds-pd waits: the delete of ds-pd is" in again.json()["error"]["message"]
    assert Deployment.objects.filter(topology=topology, kind=Kind.DELETE).count() == 1
    topology.delete()
    assert api_client.delete(f"/api/v1/clusters/{cluster.pk}/?confirm=true").status_code == 204
    assert not Cluster.objects.filter(pk=cluster.pk).exists()


def test_unknown_filter_value_names_the_accepted_values(api_client, viewer):
    api_client.force_authenticate(viewer)
    response = api_client.get("/api/v1/clusters/?health_state=sick")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["health_state"] == [
        "sick is not one of the choices; use one of: healthy, degraded, unreachable, unknown"
    ]
