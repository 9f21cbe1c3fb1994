"""Registering a cluster: the name, the credentials tested, the metrics source found, the row saved."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

import kube
from audit.services import audit_record
from clusters.credentials import ConnectionResult, Credentials, invalid, resolve_credentials
from clusters.inspection import probe_credentials
from clusters.metrics import AUTO, MetricsSettings, Probe, probe_sources, validate_settings
from clusters.models import (
    NAME_VALIDATOR,
    Cluster,
    ClusterHealthCheck,
    HealthState,
)
from clusters.services.checking import queue_check
from controlplane.api.errors import Conflict, DomainError

logger = logging.getLogger(__name__)


def _name_taken(name: str) -> Conflict:
    return Conflict(
        f"a cluster named {name} already exists; choose another name",
        code="name_taken",
        fields={"name": [f"{name} is taken; choose another name"]},
    )


def validate_name(name: str, *, exclude_pk: int | None = None) -> str:
    name = (name or "").strip()
    if not name:
        raise invalid("name", "name is required, e.g. prod-ascend-a")
    try:
        NAME_VALIDATOR(name)
    except ValidationError:
        raise invalid("name", f"name {name!r}: {NAME_VALIDATOR.message}") from None
    if len(name) > 63:
        raise invalid("name", "name is longer than 63 characters; shorten it")
    taken = Cluster.objects.filter(name=name)
    if exclude_pk is not None:
        taken = taken.exclude(pk=exclude_pk)
    if taken.exists():
        raise _name_taken(name)
    return name


def cluster_register(
    *,
    name: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    server: str | None = None,
    token: str | None = None,
    ca_bundle: str | None = None,
    in_cluster: bool = False,
    description: str = "",
    allow_unreachable: bool = False,
    metrics_source: str | None = None,
    prometheus_url: str | None = None,
    prometheus_token: str | None = None,
    prometheus_username: str | None = None,
    prometheus_password: str | None = None,
    actor: Any = None,
    source_ip: str | None = None,
) -> Cluster:
    """Validate the credentials, test them (short timeout), save them encrypted, and queue a full check.

    The metrics sources are probed too (``clusters.metrics``); ``metrics_source`` ``auto`` (or none)
    takes the recommended one, an explicit choice is kept and the probe's findings shown beside it.

    An unreachable cluster is refused with the reason on the responsible field, unless ``allow_unreachable``
    (then it is saved in state unreachable with that reason). The probe runs before, and outside, the
    transaction that saves: no database transaction is held open across network calls.
    """
    try:
        return _register(
            name=name,
            kubeconfig=kubeconfig,
            context=context,
            server=server,
            token=token,
            ca_bundle=ca_bundle,
            in_cluster=in_cluster,
            description=description,
            allow_unreachable=allow_unreachable,
            metrics_source=metrics_source,
            prometheus_url=prometheus_url,
            prometheus_token=prometheus_token,
            prometheus_username=prometheus_username,
            prometheus_password=prometheus_password,
            actor=actor,
            source_ip=source_ip,
        )
    except DomainError as error:
        # A refused registration is activity too (who tried what, and why it failed); no credential.
        how = "in-cluster" if in_cluster else "kubeconfig" if kubeconfig else "token" if token else "none"
        audit_record(
            action="cluster.register_failed",
            actor=actor,
            target=None,
            source_ip=source_ip,
            detail={
                "name": str(name)[:100],
                "server": str(server or "")[:500],
                "credentials": how,
                "error": error.message[:500],
                "fields": sorted(error.fields)[:20],
            },
        )
        raise


def _register(
    *,
    name: str,
    kubeconfig: str | None,
    context: str | None,
    server: str | None,
    token: str | None,
    ca_bundle: str | None,
    in_cluster: bool,
    description: str,
    allow_unreachable: bool,
    metrics_source: str | None,
    prometheus_url: str | None,
    prometheus_token: str | None,
    prometheus_username: str | None,
    prometheus_password: str | None,
    actor: Any,
    source_ip: str | None,
) -> Cluster:
    name = validate_name(name)
    settings = validate_settings(
        source=metrics_source,
        prometheus_url=prometheus_url,
        prometheus_token=prometheus_token,
        prometheus_username=prometheus_username,
        prometheus_password=prometheus_password,
    )
    creds, result = tested_credentials(
        name=name,
        kubeconfig=kubeconfig,
        context=context,
        server=server,
        token=token,
        ca_bundle=ca_bundle,
        in_cluster=in_cluster,
        allow_unreachable=allow_unreachable,
    )
    found = _probe_metrics(creds, name, settings) if result.ok else None
    return _save_new(
        name=name,
        description=description,
        creds=creds,
        result=result,
        metrics=settings,
        probe=found,
        actor=actor,
        source_ip=source_ip,
    )


def _probe_metrics(creds: Credentials, name: str, settings: MetricsSettings) -> Probe:
    import secrets as _secrets

    conn = creds.connection(cluster_id=-_secrets.randbelow(2**31) - 1, name=name)
    try:
        return probe_sources(conn, settings, creds.namespace)
    finally:
        kube.forget(conn.cluster_id)


def chosen_source(settings: MetricsSettings, found: Probe | None, current: str) -> str:
    if settings.source != AUTO:
        return settings.source
    return found["recommended"] if found else current


def tested_credentials(
    *,
    name: str,
    kubeconfig: str | None,
    context: str | None,
    server: str | None,
    token: str | None,
    ca_bundle: str | None,
    in_cluster: bool,
    allow_unreachable: bool,
) -> tuple[Credentials, ConnectionResult]:
    """Validate one way of connecting and test it (network, no transaction held); an unreachable cluster
    is refused with the reason on the responsible field unless ``allow_unreachable``."""
    creds = resolve_credentials(
        kubeconfig=kubeconfig,
        context=context,
        server=server,
        token=token,
        ca_bundle=ca_bundle,
        in_cluster=in_cluster,
    )
    result, field = probe_credentials(creds, name)
    if not result.ok and not allow_unreachable:
        raise DomainError(result.message, code="unreachable", fields={field: [result.message]})
    return creds, result


@transaction.atomic
def _save_new(
    *,
    name: str,
    description: str,
    creds: Credentials,
    result: ConnectionResult,
    metrics: MetricsSettings,
    probe: Probe | None,
    actor: Any,
    source_ip: str | None,
) -> Cluster:
    now = timezone.now()
    try:
        with transaction.atomic():
            cluster = Cluster.objects.create(
                name=name,
                description=(description or "").strip()[:500],
                **creds.stored(),
                **metrics.stored(),
                metrics_source=chosen_source(metrics, probe, "direct"),
                metrics_probe=dict(probe) if probe else {},
                credential_version=secrets.token_hex(8),
                health_state=HealthState.UNKNOWN if result.ok else HealthState.UNREACHABLE,
                last_error="" if result.ok else result.message,
                version=result.version,
                last_checked=now,
                last_latency_ms=result.latency_ms,
                created_by=actor if actor is not None and getattr(actor, "is_authenticated", False) else None,
            )
    except IntegrityError:
        raise _name_taken(name) from None
    ClusterHealthCheck.objects.create(
        cluster=cluster,
        checked_at=now,
        state=cluster.health_state,
        latency_ms=result.latency_ms,
        message=result.message if not result.ok else f"connected ({result.version}); full check queued",
    )
    audit_record(
        action="cluster.register",
        actor=actor,
        target=cluster,
        source_ip=source_ip,
        detail={
            "auth_method": creds.auth_method,
            "server": creds.server,
            "context": creds.context,
            "reachable": result.ok,
            "metrics_source": cluster.metrics_source,
        },
    )
    queue_check(cluster.pk)
    logger.info("registered cluster %s (%s, %s)", cluster.name, creds.auth_method, creds.server)
    return cluster
