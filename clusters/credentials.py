"""Validating the ways to connect to a cluster and turning them into credentials (no network here)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

import kube
from clusters.models import AuthMethod
from controlplane.api.errors import DomainError
from kube.kubeconfig import (
    KubeconfigError,
    credentials_from_kubeconfig,
    in_cluster_credentials,
    token_problem,
    validate_server_url,
)


@dataclass(frozen=True)
class Credentials:
    """One validated way of connecting; the secrets stay out of ``repr`` (tracebacks, logs)."""

    auth_method: str
    server: str
    token: str = field(default="", repr=False)
    ca_bundle: str = field(default="", repr=False)
    client_cert: str = field(default="", repr=False)
    client_key: str = field(default="", repr=False)
    kubeconfig: str = field(default="", repr=False)
    context: str = ""
    namespace: str = ""

    def stored(self) -> dict[str, str]:
        """The model fields to save. In-cluster secrets are not stored: the pod's files are read afresh."""
        keep = self.auth_method != AuthMethod.IN_CLUSTER
        return {
            "auth_method": self.auth_method,
            "server": self.server,
            "context_name": self.context,
            "default_namespace": self.namespace,
            "kubeconfig": self.kubeconfig,
            "token": self.token if keep else "",
            "ca_bundle": self.ca_bundle if keep else "",
            "client_cert": self.client_cert if keep else "",
            "client_key": self.client_key if keep else "",
        }

    def connection(self, *, cluster_id: int, name: str) -> kube.ClusterConnection:
        return kube.ClusterConnection(
            cluster_id=cluster_id,
            server=self.server,
            token=self.token or None,
            ca_data=self.ca_bundle or None,
            client_cert=self.client_cert or None,
            client_key=self.client_key or None,
            credential_version=secrets.token_hex(8),
            cluster_name=name,
        )


@dataclass(frozen=True)
class ConnectionResult:
    ok: bool
    version: str = ""
    latency_ms: float | None = None
    message: str = ""
    field: str = ""
    error: kube.KubeError | None = None


def invalid(field: str, message: str, code: str = "invalid") -> DomainError:
    return DomainError(message, code=code, fields={field: [message]})


def _check_pem_certificates(text: str, field: str) -> str:
    text = text.strip()
    try:
        certs = x509.load_pem_x509_certificates(text.encode())
    except ValueError:
        certs = []
    if not certs:
        raise invalid(
            field,
            f"{field} is not a PEM certificate bundle; paste the text from -----BEGIN CERTIFICATE----- to "
            "-----END CERTIFICATE----- (for a kubeconfig: base64 -d of certificate-authority-data)",
        )
    return text + "\n"


def _check_private_key(text: str, field: str) -> str:
    try:
        load_pem_private_key(text.strip().encode(), password=None)
    except (ValueError, TypeError):
        raise invalid(field, f"{field}: the client key is not an unencrypted PEM private key") from None
    return text.strip() + "\n"


def resolve_credentials(
    *,
    kubeconfig: str | None,
    context: str | None,
    server: str | None,
    token: str | None,
    ca_bundle: str | None,
    in_cluster: bool,
) -> Credentials:
    """Validate exactly one way of connecting and turn it into Credentials (no network)."""
    ways = [bool(kubeconfig and kubeconfig.strip()), bool(server or token), in_cluster]
    if sum(ways) != 1:
        raise invalid(
            "auth_method",
            "give exactly one way to connect: a kubeconfig (with a context), or server + token "
            "(+ CA bundle), or in_cluster=true",
        )
    try:
        if kubeconfig and kubeconfig.strip():
            creds = credentials_from_kubeconfig(kubeconfig, context)
            ca = _check_pem_certificates(creds.ca_data, "kubeconfig") if creds.ca_data else ""
            if creds.client_cert and creds.client_key:
                _check_pem_certificates(creds.client_cert, "kubeconfig")
                _check_private_key(creds.client_key, "kubeconfig")
            if not ca and creds.server.startswith("https://"):
                raise KubeconfigError(
                    f"context {creds.context} has no certificate-authority-data; Tandem verifies TLS "
                    "and needs the cluster's CA bundle (kubectl config view --raw --flatten --minify)"
                )
            return Credentials(
                auth_method=AuthMethod.KUBECONFIG,
                server=creds.server,
                token=creds.token or "",
                ca_bundle=ca,
                client_cert=creds.client_cert or "",
                client_key=creds.client_key or "",
                kubeconfig=kubeconfig,
                context=creds.context,
                namespace=creds.namespace,
            )
        if in_cluster:
            incluster = in_cluster_credentials()
            return Credentials(
                auth_method=AuthMethod.IN_CLUSTER,
                server=incluster.server,
                token=incluster.token,
                ca_bundle=incluster.ca_data,
                namespace=incluster.namespace,
            )
        url = validate_server_url(server or "", field_name="server")
    except KubeconfigError as exc:
        raise invalid(exc.field, exc.message) from None
    bearer = (token or "").strip()
    if not bearer:
        raise invalid(
            "token", "token is required with server; create one with: kubectl create token <sa> -n <ns>"
        )
    if any(ch.isspace() for ch in bearer):
        raise invalid("token", "token contains spaces or line breaks; paste the token alone, on one line")
    problem = token_problem(bearer)
    if problem:
        raise invalid("token", f"token {problem}")
    ca = _check_pem_certificates(ca_bundle, "ca_bundle") if ca_bundle and ca_bundle.strip() else ""
    if url.startswith("https://") and not ca:
        raise invalid(
            "ca_bundle",
            "ca_bundle is required for an https:// server (TLS is always verified); get it with: "
            "kubectl config view --raw --minify "
            "-o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d",
        )
    return Credentials(auth_method=AuthMethod.TOKEN, server=url, token=bearer, ca_bundle=ca)


def field_for(error: kube.KubeError | None, auth_method: str) -> str:
    if auth_method == AuthMethod.KUBECONFIG:
        return "kubeconfig"
    if auth_method == AuthMethod.IN_CLUSTER:
        return "in_cluster"
    if isinstance(error, kube.KubeUnauthorized):
        return "token"
    if error is not None and "cannot trust" in error.message:
        return "ca_bundle"
    return "server"
