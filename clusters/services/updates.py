"""Changing a registered cluster (its name, credentials, context, metrics source); testing its connection."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from django.db import transaction

import kube
from audit.services import audit_record
from clusters.credentials import ConnectionResult, Credentials, invalid
from clusters.inspection import probe
from clusters.metrics import probe_sources, validate_settings
from clusters.models import (
    AuthMethod,
    Cluster,
    HealthState,
)
from clusters.selectors import cluster_connection
from clusters.services.checking import queue_check
from clusters.services.registration import chosen_source, tested_credentials, validate_name
from controlplane.api.errors import DomainError
from kube.kubeconfig import KubeconfigError

logger = logging.getLogger(__name__)


def cluster_update(
    *,
    cluster: Cluster,
    actor: Any = None,
    source_ip: str | None = None,
    name: str | None = None,
    description: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    server: str | None = None,
    token: str | None = None,
    ca_bundle: str | None = None,
    in_cluster: bool = False,
    allow_unreachable: bool = False,
) -> Cluster:
    """Rename, re-describe, or replace the credentials (tested like a registration)."""
    changed: list[str] = []
    new_name = (
        validate_name(name, exclude_pk=cluster.pk) if name is not None and name != cluster.name else None
    )
    creds = None
    if kubeconfig or server or token or ca_bundle or in_cluster:
        creds, _ = tested_credentials(
            name=new_name or cluster.name,
            kubeconfig=kubeconfig,
            context=context,
            server=server,
            token=token,
            ca_bundle=ca_bundle,
            in_cluster=in_cluster,
            allow_unreachable=allow_unreachable,
        )
    elif context is not None and context.strip() != cluster.context_name:
        creds = _switched_context(
            cluster=cluster,
            name=new_name or cluster.name,
            context=context,
            allow_unreachable=allow_unreachable,
        )
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        if new_name:
            locked.name = new_name
            changed.append("name")
        if description is not None and description.strip() != locked.description:
            locked.description = description.strip()[:500]
            changed.append("description")
        if creds is not None:
            for attribute, value in creds.stored().items():
                setattr(locked, attribute, value)
            locked.credential_version = secrets.token_hex(8)
            locked.health_state = HealthState.UNKNOWN
            changed.append("credentials")
        if not changed:
            return locked
        locked.save()
        audit_record(
            action="cluster.update",
            actor=actor,
            target=locked,
            source_ip=source_ip,
            detail={"changed": changed},
        )
        if creds is not None:
            kube.forget(locked.pk)
            queue_check(locked.pk)
    return locked


def _switched_context(*, cluster: Cluster, name: str, context: str, allow_unreachable: bool) -> Credentials:
    """A new context_name alone: the stored kubeconfig's other context, tested like a registration.
    Clusters registered without a kubeconfig have no contexts to switch to; that is refused."""
    if cluster.auth_method != AuthMethod.KUBECONFIG or not cluster.kubeconfig:
        raise invalid(
            "context_name",
            f"context_name applies only to clusters registered with a kubeconfig; {cluster.name} "
            f"connects with {cluster.get_auth_method_display()}; send new credentials instead",
        )
    if not context.strip():
        raise invalid("context_name", "context_name is empty; name one of the kubeconfig's contexts")
    try:
        creds, _ = tested_credentials(
            name=name,
            kubeconfig=cluster.kubeconfig,
            context=context,
            server=None,
            token=None,
            ca_bundle=None,
            in_cluster=False,
            allow_unreachable=allow_unreachable,
        )
    except DomainError as error:
        fields = {
            ("context_name" if k in ("context", "kubeconfig") else k): v for k, v in error.fields.items()
        }
        raise DomainError(error.message, code=error.code, fields=fields) from None
    return creds


def cluster_set_metrics_source(
    *,
    cluster: Cluster,
    metrics_source: str | None = None,
    prometheus_url: str | None = None,
    prometheus_token: str | None = None,
    prometheus_username: str | None = None,
    prometheus_password: str | None = None,
    actor: Any = None,
    source_ip: str | None = None,
) -> Cluster:
    """Choose (or re-probe, with ``auto``) where live metrics come from. Prometheus credentials left out
    (None) keep the stored ones; the probe runs before, and outside, the transaction that saves."""
    settings = validate_settings(
        source=metrics_source,
        prometheus_url=cluster.prometheus_url if prometheus_url is None else prometheus_url,
        prometheus_token=cluster.prometheus_token if prometheus_token is None else prometheus_token,
        prometheus_username=cluster.prometheus_username
        if prometheus_username is None
        else prometheus_username,
        prometheus_password=cluster.prometheus_password
        if prometheus_password is None
        else prometheus_password,
    )
    try:
        conn = cluster_connection(cluster)
    except KubeconfigError:
        found = None
    else:
        found = probe_sources(conn, settings, cluster.default_namespace)
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        before = locked.metrics_source
        for attribute, value in settings.stored().items():
            setattr(locked, attribute, value)
        locked.metrics_source = chosen_source(settings, found, locked.metrics_source)
        if found is not None:
            locked.metrics_probe = dict(found)
        locked.save()
        audit_record(
            action="cluster.metrics_source",
            actor=actor,
            target=locked,
            source_ip=source_ip,
            detail={"from": before, "to": locked.metrics_source, "prometheus_url": locked.prometheus_url},
        )
    return locked


def cluster_test_connection(*, cluster: Cluster) -> ConnectionResult:
    """Version and one authenticated call with the stored credentials; changes nothing."""
    try:
        conn = cluster_connection(cluster)
    except KubeconfigError as exc:
        return ConnectionResult(ok=False, message=exc.message, field=exc.field)
    return probe(conn)
