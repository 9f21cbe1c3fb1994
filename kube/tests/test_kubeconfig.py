from __future__ import annotations

import base64

import pytest
import yaml

from kube.kubeconfig import (
    KubeconfigError,
    credentials_from_kubeconfig,
    in_cluster_credentials,
    list_contexts,
    validate_server_url,
)

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(*, user=None, cluster=None, contexts=None, current="a") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": current,
            "clusters": [
                {
                    "name": "c1",
                    "cluster": cluster
                    or {"server": "https://k8s.example.com:6443", "certificate-authority-data": _b64(CA)},
                }
            ],
            "users": [{"name": "u1", "user": user or {"token": "abc.def"}}],
            "contexts": contexts
            or [
                {"name": "a", "context": {"cluster": "c1", "user": "u1", "namespace": "llm"}},
                {"name": "b", "context": {"cluster": "c1", "user": "u1"}},
            ],
        }
    )


def test_current_context_is_used_by_default():
    creds = credentials_from_kubeconfig(kubeconfig())
    assert creds.context == "a"
    assert creds.server == "https://k8s.example.com:6443"
    assert creds.token == "abc.def"
    assert creds.ca_data == CA
    assert creds.namespace == "llm"


def test_contexts_are_listed_in_file_order():
    assert list_contexts(kubeconfig()) == ["a", "b"]


def test_unknown_context_names_the_contexts_that_exist():
    with pytest.raises(KubeconfigError) as err:
        credentials_from_kubeconfig(kubeconfig(), "prod")
    assert err.value.field == "context"
    assert "'prod' is not in the kubeconfig; it has: a, b" in err.value.message
    assert err.value.contexts == ["a", "b"]


def test_exec_plugin_is_refused_with_the_way_out():
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "/usr/local/bin/aws",
            "args": ["eks", "get-token"],
        }
    }
    with pytest.raises(KubeconfigError) as err:
        credentials_from_kubeconfig(kubeconfig(user=user))
    assert "context a uses an exec credential plugin (aws); Tandem cannot run plugins" in err.value.message
    assert "kubectl create token" in err.value.message


def test_auth_provider_is_refused():
    with pytest.raises(KubeconfigError, match="gcp auth-provider"):
        credentials_from_kubeconfig(kubeconfig(user={"auth-provider": {"name": "gcp"}}))


def test_insecure_skip_tls_verify_is_refused():
    cluster = {"server": "https://k8s.example.com:6443", "insecure-skip-tls-verify": True}
    with pytest.raises(KubeconfigError, match="always verifies"):
        credentials_from_kubeconfig(kubeconfig(cluster=cluster))


def test_file_references_are_refused_with_the_flatten_command():
    cluster = {"server": "https://k8s.example.com:6443", "certificate-authority": "/home/me/ca.crt"}
    with pytest.raises(KubeconfigError, match="--flatten"):
        credentials_from_kubeconfig(kubeconfig(cluster=cluster))
    with pytest.raises(KubeconfigError, match="client-certificate"):
        credentials_from_kubeconfig(kubeconfig(user={"client-certificate": "/x.crt", "client-key": "/x.key"}))


def test_client_certificate_pair_is_decoded():
    user = {"client-certificate-data": _b64("CERT"), "client-key-data": _b64("KEY")}
    creds = credentials_from_kubeconfig(kubeconfig(user=user))
    assert (creds.client_cert, creds.client_key, creds.token) == ("CERT", "KEY", None)


def test_plain_http_is_allowed_only_on_loopback():
    assert validate_server_url("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"
    assert validate_server_url("http://localhost:8080") == "http://localhost:8080"
    with pytest.raises(KubeconfigError, match="https:// only"):
        validate_server_url("http://10.0.0.1:8080")
    with pytest.raises(KubeconfigError, match="not an API server URL"):
        validate_server_url("k8s.example.com")


def test_garbage_is_not_a_kubeconfig():
    with pytest.raises(KubeconfigError, match="not valid YAML"):
        credentials_from_kubeconfig("a: [b")
    with pytest.raises(KubeconfigError, match="not a kubeconfig"):
        credentials_from_kubeconfig("hello: world")


def test_no_credentials_is_refused():
    with pytest.raises(KubeconfigError, match="no credentials"):
        credentials_from_kubeconfig(kubeconfig(user={"token": ""}))


def test_in_cluster_outside_a_pod_says_so(tmp_path):
    with pytest.raises(KubeconfigError, match="not running inside a Kubernetes pod") as err:
        in_cluster_credentials(str(tmp_path), environ={})
    assert err.value.field == "in_cluster"


def test_in_cluster_reads_the_service_account(tmp_path):
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "ca.crt").write_text(CA)
    (tmp_path / "namespace").write_text("tandem")
    creds = in_cluster_credentials(
        str(tmp_path), environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert creds.server == "https://10.96.0.1:443"
    assert creds.token == "sa-token"
    assert creds.namespace == "tandem"
