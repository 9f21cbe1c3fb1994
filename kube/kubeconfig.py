"""Reading an uploaded kubeconfig into credentials Tandem can store (pure: no network, no files).

Refused, each with the fix in the message: exec credential plugins and auth-provider entries (Tandem runs no
plugins), ``insecure-skip-tls-verify`` (TLS verification is always on), file references (an uploaded file
cannot point at files on the uploader's disk), basic auth. ``http://`` servers are accepted only on loopback
addresses (a local development cluster such as Tandem's sandbox); everything else must be ``https://``.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import yaml

from kube.client import is_loopback_host

SERVICE_ACCOUNT_ADVICE = (
    "create a service account token instead: kubectl create serviceaccount tandem -n kube-system && "
    "kubectl create token tandem -n kube-system --duration=8760h, then register with the API server URL, "
    "that token and the cluster's CA bundle"
)
FLATTEN_HINT = "embed the files with: kubectl config view --raw --flatten --minify --context <name>"


class KubeconfigError(ValueError):
    """A kubeconfig Tandem cannot use; ``field`` is the form field to blame ("kubeconfig" or "context")."""

    def __init__(self, message: str, *, field: str = "kubeconfig", contexts: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.contexts = contexts or []


@dataclass(frozen=True)
class KubeconfigCredentials:
    context: str
    cluster_name: str
    server: str
    namespace: str = ""
    ca_data: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    client_cert: str | None = field(default=None, repr=False)
    client_key: str | None = field(default=None, repr=False)


def token_problem(token: str) -> str | None:
    """Why a bearer token cannot go into an HTTP Authorization header, or None. Kubernetes tokens
    (service account JWTs, bootstrap tokens) are visible ASCII; anything else is a paste mistake."""
    if not token.isascii() or not token.isprintable() or any(ch.isspace() for ch in token):
        return (
            "contains characters a bearer token cannot have (only visible ASCII: letters, digits and "
            "-._~+/=); paste the token exactly as kubectl create token printed it"
        )
    return None


def validate_server_url(server: str, *, field_name: str = "server") -> str:
    """A usable API server URL: https://, or http:// on loopback only. Returns it without a trailing slash."""
    server = (server or "").strip()
    if not server.isascii() or not server.isprintable():
        raise KubeconfigError(
            f"{server!r} has characters a URL cannot carry; write the host in ASCII (punycode for "
            "international names), e.g. https://10.0.0.1:6443",
            field=field_name,
        )
    parsed = urlparse(server)
    if parsed.scheme not in ("https", "http") or not parsed.hostname:
        raise KubeconfigError(
            f"{server or '(empty)'} is not an API server URL; use https://host:6443", field=field_name
        )
    if parsed.scheme == "http" and not is_loopback_host(server):
        raise KubeconfigError(
            f"{server} is plain http://; Tandem talks to clusters over https:// only (http:// is accepted "
            "for loopback addresses such as 127.0.0.1, for local development clusters)",
            field=field_name,
        )
    if parsed.path not in ("", "/") or parsed.query:
        raise KubeconfigError(
            f"{server} has a path or query; give only scheme, host and port", field=field_name
        )
    return server.rstrip("/")


def _named(entries: Any, what: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    if entries is None:
        return found
    if not isinstance(entries, list):
        raise KubeconfigError(f"the kubeconfig's `{what}` is not a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") is not None:
            found[str(entry["name"])] = entry.get(what[:-1]) or {}
    return found


def _b64(value: Any, what: str, context: str) -> str:
    try:
        return base64.b64decode(str(value), validate=False).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise KubeconfigError(f"context {context}: {what} is not valid base64-encoded PEM") from None


def parse_kubeconfig(text: str) -> dict[str, Any]:
    """YAML to dict with a readable error; the result has at least a ``contexts`` list."""
    try:
        data = yaml.safe_load(text or "")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(
            f"the kubeconfig is not valid YAML{where}; upload the file as kubectl wrote it"
        ) from None
    if not isinstance(data, dict) or data.get("kind", "Config") != "Config" or "contexts" not in data:
        raise KubeconfigError("this is not a kubeconfig (no `contexts`); upload the file from ~/.kube/config")
    return data


def list_contexts(text: str) -> list[str]:
    """Context names in a kubeconfig, in file order."""
    return list(_named(parse_kubeconfig(text).get("contexts"), "contexts"))


def credentials_from_kubeconfig(text: str, context: str | None = None) -> KubeconfigCredentials:
    """Resolve one context (the given one, else current-context, else the only one) to stored credentials."""
    data = parse_kubeconfig(text)
    contexts = _named(data.get("contexts"), "contexts")
    names = list(contexts)
    if not names:
        raise KubeconfigError("the kubeconfig has no contexts")
    chosen = (context or "").strip() or str(data.get("current-context") or "")
    if not chosen:
        if len(names) > 1:
            raise KubeconfigError(
                f"the kubeconfig has {len(names)} contexts and no current-context; choose one of: "
                + ", ".join(names),
                field="context",
                contexts=names,
            )
        chosen = names[0]
    if chosen not in contexts:
        raise KubeconfigError(
            f"context {chosen!r} is not in the kubeconfig; it has: {', '.join(names)}",
            field="context",
            contexts=names,
        )
    ctx = contexts[chosen]
    clusters = _named(data.get("clusters"), "clusters")
    users = _named(data.get("users"), "users")
    cluster_ref, user_ref = str(ctx.get("cluster") or ""), str(ctx.get("user") or "")
    if cluster_ref not in clusters:
        raise KubeconfigError(f"context {chosen} names cluster {cluster_ref!r}, which the kubeconfig lacks")
    cluster = clusters[cluster_ref]
    user = users.get(user_ref, {}) if user_ref else {}
    if user_ref and user_ref not in users:
        raise KubeconfigError(f"context {chosen} names user {user_ref!r}, which the kubeconfig lacks")

    if cluster.get("insecure-skip-tls-verify"):
        raise KubeconfigError(
            f"context {chosen} sets insecure-skip-tls-verify; Tandem always verifies the API server's "
            "certificate — remove that line and add certificate-authority-data (the cluster's CA bundle)"
        )
    if cluster.get("certificate-authority") and not cluster.get("certificate-authority-data"):
        raise KubeconfigError(
            f"context {chosen} points at a CA file ({cluster['certificate-authority']}) Tandem cannot read; "
            + FLATTEN_HINT
        )
    if cluster.get("proxy-url"):
        raise KubeconfigError(
            f"context {chosen} goes through a proxy (proxy-url); Tandem connects directly — "
            "remove proxy-url and make the API server reachable from Tandem"
        )
    server = validate_server_url(str(cluster.get("server") or ""), field_name="kubeconfig")

    if user.get("exec"):
        command = os.path.basename(str((user["exec"] or {}).get("command") or "a command"))
        raise KubeconfigError(
            f"context {chosen} uses an exec credential plugin ({command}); Tandem cannot run plugins — "
            + SERVICE_ACCOUNT_ADVICE
        )
    if user.get("auth-provider"):
        provider = str((user["auth-provider"] or {}).get("name") or "unknown")
        raise KubeconfigError(
            f"context {chosen} uses the {provider} auth-provider; Tandem cannot refresh provider tokens — "
            + SERVICE_ACCOUNT_ADVICE
        )
    if user.get("username") or user.get("password"):
        raise KubeconfigError(
            f"context {chosen} uses basic auth, which Kubernetes no longer supports — "
            + SERVICE_ACCOUNT_ADVICE
        )
    for ref in ("tokenFile", "client-certificate", "client-key"):
        embedded = user.get("token") if ref == "tokenFile" else user.get(f"{ref}-data")
        if user.get(ref) and not embedded:
            raise KubeconfigError(
                f"context {chosen} points at a file ({ref}: {user[ref]}) Tandem cannot read; " + FLATTEN_HINT
            )

    token = str(user.get("token") or "").strip() or None
    problem = token_problem(token) if token else None
    if problem:
        raise KubeconfigError(f"context {chosen}: the user's token {problem}")
    cert = (
        _b64(user["client-certificate-data"], "client-certificate-data", chosen)
        if user.get("client-certificate-data")
        else None
    )
    client_key = (
        _b64(user["client-key-data"], "client-key-data", chosen) if user.get("client-key-data") else None
    )
    if bool(cert) != bool(client_key):
        raise KubeconfigError(
            f"context {chosen} has a client certificate without its key (or the reverse); "
            "give both client-certificate-data and client-key-data"
        )
    if not token and not cert:
        raise KubeconfigError(
            f"context {chosen} has no credentials (no token, no client certificate); "
            + SERVICE_ACCOUNT_ADVICE
        )
    ca = (
        _b64(cluster["certificate-authority-data"], "certificate-authority-data", chosen)
        if cluster.get("certificate-authority-data")
        else None
    )
    return KubeconfigCredentials(
        context=chosen,
        cluster_name=cluster_ref,
        server=server,
        namespace=str(ctx.get("namespace") or ""),
        ca_data=ca,
        token=token,
        client_cert=cert,
        client_key=client_key,
    )


# Where Kubernetes mounts a pod's service account (tests point this elsewhere).
SERVICEACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class InClusterCredentials:
    server: str
    token: str = field(repr=False)
    ca_data: str = field(repr=False)
    namespace: str


def in_cluster_credentials(
    directory: str | None = None, environ: dict[str, str] | None = None
) -> InClusterCredentials:
    """The service account Tandem runs as, when it runs in a pod. Read afresh each time (tokens rotate)."""
    env = os.environ if environ is None else environ
    directory = directory or SERVICEACCOUNT_DIR
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "443")
    token_path, ca_path = os.path.join(directory, "token"), os.path.join(directory, "ca.crt")
    if not host or not os.path.exists(token_path):
        raise KubeconfigError(
            "Tandem is not running inside a Kubernetes pod (no KUBERNETES_SERVICE_HOST or no service account "
            f"token at {token_path}); register this cluster with a kubeconfig or a URL and token instead",
            field="in_cluster",
        )
    with open(token_path) as handle:
        token = handle.read().strip()
    ca = ""
    if os.path.exists(ca_path):
        with open(ca_path) as handle:
            ca = handle.read()
    namespace = ""
    ns_path = os.path.join(directory, "namespace")
    if os.path.exists(ns_path):
        with open(ns_path) as handle:
            namespace = handle.read().strip()
    host = f"[{host}]" if ":" in host else host
    return InClusterCredentials(server=f"https://{host}:{port}", token=token, ca_data=ca, namespace=namespace)
