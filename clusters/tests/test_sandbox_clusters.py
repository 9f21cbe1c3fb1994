"""Registering and checking real (sandbox) clusters over HTTP and HTTPS."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC

import pytest
from django.core.management import call_command

from clusters.models import Cluster, HealthState
from clusters.services import cluster_check, cluster_register, cluster_test_connection
from clusters.tests.helpers import kubeconfig_text
from controlplane.api.errors import DomainError

pytestmark = pytest.mark.django_db


def test_register_by_kubeconfig_then_check_is_healthy_with_inventory(sandbox_cluster, admin_user):
    text = sandbox_cluster.kubeconfig_path.read_text()
    cluster = cluster_register(name="sandbox", kubeconfig=text, actor=admin_user)
    assert cluster.server == sandbox_cluster.server
    assert cluster.version.startswith("v1.")
    checked = cluster_check(cluster_id=cluster.pk)
    assert checked.health_state == HealthState.HEALTHY, checked.last_error
    assert checked.kthena_installed is True
    assert checked.permissions and all(p["allowed"] for p in checked.permissions)
    live = json.loads(sandbox_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    nodes = {n.name: n for n in checked.nodes.all()}
    assert set(nodes) == {n["metadata"]["name"] for n in live}
    for item in live:
        node = nodes[item["metadata"]["name"]]
        assert node.accelerator_resource == "huawei.com/ascend-1980"
        assert node.capacity == int(item["status"]["capacity"]["huawei.com/ascend-1980"])
        assert node.allocatable == int(item["status"]["allocatable"]["huawei.com/ascend-1980"])
        assert node.ready
    assert cluster_test_connection(cluster=checked).ok


def test_register_by_token_and_ca_over_tls(sandbox_cluster_tls, admin_user):
    ca = sandbox_cluster_tls.ca_path.read_text()
    cluster = cluster_register(
        name="tls",
        server=sandbox_cluster_tls.server,
        token=sandbox_cluster_tls.token,
        ca_bundle=ca,
        actor=admin_user,
    )
    assert cluster.server.startswith("https://")
    assert cluster_check(cluster_id=cluster.pk).health_state == HealthState.HEALTHY


def test_tls_with_a_ca_that_did_not_sign_the_server_is_refused(sandbox_cluster_tls, admin_user):
    from datetime import datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "other-ca")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    with pytest.raises(DomainError) as err:
        cluster_register(
            name="tls",
            server=sandbox_cluster_tls.server,
            token=sandbox_cluster_tls.token,
            ca_bundle=cert.public_bytes(Encoding.PEM).decode(),
            actor=admin_user,
        )
    assert err.value.fields["ca_bundle"][0].startswith(f"cannot trust {sandbox_cluster_tls.server}")


def test_wrong_token_is_blamed_on_the_token(sandbox_cluster, admin_user):
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", server=sandbox_cluster.server, token="wrong-token", actor=admin_user)
    assert "rejected the credentials (HTTP 401)" in err.value.fields["token"][0]


def test_cluster_without_kthena_is_flagged(sandbox_cluster_no_kthena, admin_user):
    text = sandbox_cluster_no_kthena.kubeconfig_path.read_text()
    cluster = cluster_register(name="plain", kubeconfig=text, actor=admin_user)
    checked = cluster_check(cluster_id=cluster.pk)
    assert checked.kthena_installed is False
    assert checked.health_state == HealthState.HEALTHY


def test_register_cluster_command_is_idempotent(sandbox_cluster):
    path = str(sandbox_cluster.kubeconfig_path)
    out = io.StringIO()
    call_command("register_cluster", "--name", "sandbox", "--kubeconfig", path, stdout=out)
    call_command("register_cluster", "--name", "sandbox", "--kubeconfig", path, stdout=out)
    assert Cluster.objects.filter(name="sandbox").count() == 1
    assert "registered cluster sandbox" in out.getvalue()
    assert "already registered" in out.getvalue()


def test_api_registers_checks_and_never_returns_or_logs_the_token(
    sandbox_cluster, api_client, admin_user, caplog
):
    caplog.set_level(logging.DEBUG)
    api_client.force_authenticate(admin_user)
    text = sandbox_cluster.kubeconfig_path.read_text()
    created = api_client.post(
        "/api/v1/clusters/", {"name": "api-sandbox", "kubeconfig": text, "context_name": "tandem-sandbox"}
    )
    assert created.status_code == 201, created.content
    cid = created.json()["id"]
    checked = api_client.post(f"/api/v1/clusters/{cid}/check/")
    assert checked.json()["health_state"] == "healthy"
    inventory = api_client.get(f"/api/v1/clusters/{cid}/inventory/").json()
    assert inventory["accelerators"][0]["resource"] == "huawei.com/ascend-1980"
    assert inventory["accelerators"][0]["capacity"] == 32
    tested = api_client.post(f"/api/v1/clusters/{cid}/test-connection/").json()
    assert tested["ok"] is True
    for response in (created, checked, api_client.get(f"/api/v1/clusters/{cid}/")):
        assert sandbox_cluster.token not in response.content.decode()
    assert sandbox_cluster.token not in caplog.text


def test_bad_context_names_the_contexts(sandbox_cluster, admin_user):
    text = kubeconfig_text(
        server=sandbox_cluster.server,
        user={"token": sandbox_cluster.token},
        contexts=("tandem-sandbox", "other"),
        current="tandem-sandbox",
    )
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", kubeconfig=text, context="prod", actor=admin_user)
    assert err.value.fields["context"] == [
        "context 'prod' is not in the kubeconfig; it has: tandem-sandbox, other"
    ]


def test_credentials_are_replaced_through_the_api(sandbox_cluster, api_client, admin_user):
    from audit.models import AuditEvent
    from clusters.tests.helpers import closed_port

    api_client.force_authenticate(admin_user)
    created = api_client.post(
        "/api/v1/clusters/",
        {
            "name": "moved",
            "server": f"http://127.0.0.1:{closed_port()}",
            "token": "old-token",
            "allow_unreachable": True,
        },
    )
    cid = created.json()["id"]
    before = Cluster.objects.get(pk=cid).credential_version
    patched = api_client.patch(
        f"/api/v1/clusters/{cid}/", {"kubeconfig": sandbox_cluster.kubeconfig_path.read_text()}
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["server"] == sandbox_cluster.server
    assert sandbox_cluster.token not in patched.content.decode()
    cluster = Cluster.objects.get(pk=cid)
    assert cluster.credential_version != before
    assert cluster.auth_method == "kubeconfig"
    assert AuditEvent.objects.filter(action="cluster.update", detail__changed=["credentials"]).exists()
    assert cluster_check(cluster_id=cid).health_state == HealthState.HEALTHY
