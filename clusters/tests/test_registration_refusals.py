"""Registration refuses what cannot work, naming the field and the fix (no cluster needed)."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, ClusterHealthCheck, HealthState
from clusters.services import cluster_check, cluster_register
from clusters.tests.helpers import closed_port, kubeconfig_text
from controlplane.api.errors import Conflict, DomainError

pytestmark = pytest.mark.django_db


def test_exec_plugin_kubeconfig_is_refused(admin_user):
    text = kubeconfig_text(
        server="https://eks.example.com", user={"exec": {"command": "aws", "args": ["eks"]}}
    )
    with pytest.raises(DomainError) as err:
        cluster_register(name="eks", kubeconfig=text, actor=admin_user)
    message = err.value.fields["kubeconfig"][0]
    assert "context lab uses an exec credential plugin (aws); Tandem cannot run plugins" in message
    assert "kubectl create token" in message
    assert not Cluster.objects.exists()


def test_unknown_context_lists_the_contexts_there_are(admin_user):
    text = kubeconfig_text(server="http://127.0.0.1:1", contexts=("lab", "prod"))
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", kubeconfig=text, context="staging", actor=admin_user)
    assert err.value.fields["context"] == ["context 'staging' is not in the kubeconfig; it has: lab, prod"]


def test_plain_http_to_a_remote_server_is_refused(admin_user):
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", server="http://10.1.2.3:8080", token="t", actor=admin_user)
    assert "https:// only" in err.value.fields["server"][0]


def test_https_without_a_ca_bundle_is_refused(admin_user):
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", server="https://10.1.2.3:6443", token="t", actor=admin_user)
    assert "ca_bundle is required" in err.value.fields["ca_bundle"][0]


def test_garbage_ca_bundle_is_refused(admin_user):
    with pytest.raises(DomainError) as err:
        cluster_register(
            name="x", server="https://10.1.2.3:6443", token="t", ca_bundle="hello", actor=admin_user
        )
    assert "not a PEM certificate bundle" in err.value.fields["ca_bundle"][0]


def test_token_with_whitespace_is_refused(admin_user):
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", server="http://127.0.0.1:1", token="abc def", actor=admin_user)
    assert "spaces or line breaks" in err.value.fields["token"][0]


def test_exactly_one_way_to_connect(admin_user):
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", server="http://127.0.0.1:1", token="t", in_cluster=True, actor=admin_user)
    assert "exactly one way" in err.value.fields["auth_method"][0]


def test_in_cluster_outside_a_cluster_is_refused(admin_user, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(DomainError) as err:
        cluster_register(name="x", in_cluster=True, actor=admin_user)
    assert "not running inside a Kubernetes pod" in err.value.fields["in_cluster"][0]


def test_bad_name_is_refused(admin_user):
    with pytest.raises(DomainError) as err:
        cluster_register(name="Prod_A", server="http://127.0.0.1:1", token="t", actor=admin_user)
    assert "lowercase letters" in err.value.fields["name"][0]


def test_unreachable_server_is_refused_with_words(admin_user):
    port = closed_port()
    with pytest.raises(DomainError) as err:
        cluster_register(name="gone", server=f"http://127.0.0.1:{port}", token="t", actor=admin_user)
    assert err.value.code == "unreachable"
    assert err.value.fields["server"] == [f"cannot reach http://127.0.0.1:{port}: connection refused"]


def test_unreachable_server_saved_on_request_is_unreachable_with_words(admin_user):
    port = closed_port()
    cluster = cluster_register(
        name="gone", server=f"http://127.0.0.1:{port}", token="t", allow_unreachable=True, actor=admin_user
    )
    assert cluster.health_state == HealthState.UNREACHABLE
    assert cluster.last_error == f"cannot reach http://127.0.0.1:{port}: connection refused"
    checked = cluster_check(cluster_id=cluster.pk)
    assert checked.health_state == HealthState.UNREACHABLE
    assert "connection refused" in checked.last_error
    assert ClusterHealthCheck.objects.filter(cluster=cluster, state="unreachable").count() == 2


def test_duplicate_name_conflicts(admin_user):
    cluster_register(
        name="dup",
        server=f"http://127.0.0.1:{closed_port()}",
        token="t",
        allow_unreachable=True,
        actor=admin_user,
    )
    with pytest.raises(Conflict) as err:
        cluster_register(
            name="dup", server="http://127.0.0.1:1", token="t", allow_unreachable=True, actor=admin_user
        )
    assert "dup is taken" in err.value.fields["name"][0]
