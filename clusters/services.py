"""Writes: register, update, check and remove clusters. Credentials never leave this module in words."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

import kube
from audit.services import audit_record
from clusters.checks import CheckFacts, assess
from clusters.credentials import ConnectionResult, Credentials, invalid, resolve_credentials
from clusters.inspection import gather_facts, probe, probe_credentials
from clusters.metrics import AUTO, MetricsSettings, Probe, probe_sources, validate_settings
from clusters.models import (
    NAME_VALIDATOR,
    AuthMethod,
    Cluster,
    ClusterHealthCheck,
    HealthState,
    NodeInventory,
)
from clusters.selectors import cluster_connection, cluster_topology_names
from controlplane.api.errors import Conflict, DomainError
from kube.kubeconfig import KubeconfigError

logger = logging.getLogger(__name__)
HISTORY_KEEP = 500


def _name_taken(name: str) -> Conflict:
    return Conflict(
        f"a cluster named {name} already exists; choose another name",
        code="name_taken",
        fields={"name": [f"{name} is taken; choose another name"]},
    )


def _validate_name(name: str, *, exclude_pk: int | None = None) -> str:
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
    name = _validate_name(name)
    settings = validate_settings(
        source=metrics_source,
        prometheus_url=prometheus_url,
        prometheus_token=prometheus_token,
        prometheus_username=prometheus_username,
        prometheus_password=prometheus_password,
    )
    creds, result = _tested_credentials(
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


def _chosen_source(settings: MetricsSettings, found: Probe | None, current: str) -> str:
    if settings.source != AUTO:
        return settings.source
    return found["recommended"] if found else current


def _tested_credentials(
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
                metrics_source=_chosen_source(metrics, probe, "direct"),
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
    _queue_check(cluster.pk)
    logger.info("registered cluster %s (%s, %s)", cluster.name, creds.auth_method, creds.server)
    return cluster


def _queue_check(cluster_id: int) -> None:
    transaction.on_commit(lambda: _send_check(cluster_id))


def _send_check(cluster_id: int) -> None:
    """The full check after registration or a credential change. Without Redis the change still stands:
    the periodic check (CLUSTER_CHECK_SECONDS) runs it once Redis is back."""
    import redis
    from kombu.exceptions import OperationalError

    from clusters.tasks import check_cluster

    try:
        check_cluster.delay(cluster_id)
    except (OperationalError, redis.RedisError) as error:
        logger.warning(
            "cluster %s: full check not queued (Redis: %s); the periodic check runs it", cluster_id, error
        )


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
        _validate_name(name, exclude_pk=cluster.pk) if name is not None and name != cluster.name else None
    )
    creds = None
    if kubeconfig or server or token or ca_bundle or in_cluster:
        creds, _ = _tested_credentials(
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
            _queue_check(locked.pk)
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
        creds, _ = _tested_credentials(
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
        locked.metrics_source = _chosen_source(settings, found, locked.metrics_source)
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


def cluster_check(*, cluster_id: int, actor: Any = None, source_ip: str | None = None) -> Cluster:
    """Full check: connectivity, version, permissions, CRDs, node inventory; stores state and history."""
    cluster = Cluster.objects.get(pk=cluster_id)
    started = time.monotonic()
    nodes: list[kube.NodeInfo] = []
    try:
        conn = cluster_connection(cluster)
    except KubeconfigError as exc:
        facts = CheckFacts(reachable=False, error=exc.message)
    else:
        facts, nodes = gather_facts(conn)
    state, message = assess(facts)
    elapsed = round((time.monotonic() - started) * 1000, 1)
    return _store_check(
        cluster_id=cluster_id,
        facts=facts,
        nodes=nodes,
        state=state,
        message=message,
        elapsed_ms=elapsed,
        actor=actor,
        source_ip=source_ip,
    )


@transaction.atomic
def _store_check(
    *,
    cluster_id: int,
    facts: CheckFacts,
    nodes: list[kube.NodeInfo],
    state: str,
    message: str,
    elapsed_ms: float,
    actor: Any,
    source_ip: str | None,
) -> Cluster:
    cluster = Cluster.objects.select_for_update().get(pk=cluster_id)
    now = timezone.now()
    previous = cluster.health_state
    cluster.health_state = state
    cluster.last_error = message
    cluster.last_checked = now
    cluster.last_latency_ms = facts.latency_ms
    if facts.reachable:
        cluster.version = facts.version
        cluster.permissions = facts.permissions
        if facts.crds is not None:
            cluster.installed_crds = sorted(facts.crds)
            cluster.kthena_installed = facts.kthena_installed
        if facts.nodes_total is not None:
            _replace_inventory(cluster, nodes, now)
    cluster.save()
    ClusterHealthCheck.objects.create(
        cluster=cluster,
        checked_at=now,
        state=state,
        latency_ms=facts.latency_ms,
        message=message or f"{facts.version}; check took {elapsed_ms:.0f} ms",
    )
    stale = cluster.health_checks.order_by("-checked_at", "-id").values_list("id", flat=True)[HISTORY_KEEP:]
    ClusterHealthCheck.objects.filter(id__in=list(stale)).delete()
    if actor is not None:
        audit_record(
            action="cluster.check", actor=actor, target=cluster, source_ip=source_ip, detail={"state": state}
        )
    elif previous != state and previous != HealthState.UNKNOWN:
        audit_record(
            action="cluster.health_changed",
            target=cluster,
            detail={"from": previous, "to": state, "message": message[:500]},
        )
    return cluster


def _replace_inventory(cluster: Cluster, nodes: list[kube.NodeInfo], now: Any) -> None:
    cluster.nodes.exclude(name__in=[n.name for n in nodes]).delete()
    for node in nodes:
        accelerators = {
            r: {
                "capacity": node.capacity.get(r, 0),
                "allocatable": node.allocatable.get(r, 0),
                "in_use": node.in_use.get(r, 0),
            }
            for r in node.accelerators
        }
        main = max(node.accelerators, key=lambda r: (node.capacity.get(r, 0), r)) if node.accelerators else ""
        NodeInventory.objects.update_or_create(
            cluster=cluster,
            name=node.name,
            defaults={
                "labels": node.labels,
                "ready": node.ready,
                "schedulable": not node.unschedulable,
                "accelerator_resource": main,
                "capacity": node.capacity.get(main, 0) if main else 0,
                "allocatable": node.allocatable.get(main, 0) if main else 0,
                "in_use": node.in_use.get(main, 0) if main else 0,
                "accelerators": accelerators,
                "seen": now,
            },
        )


def cluster_delete(
    *, cluster: Cluster, confirm: bool = False, actor: Any = None, source_ip: str | None = None
) -> None:
    """Remove a cluster. Refused (409, naming them) while topologies run on it unless ``confirm``; with
    ``confirm`` their objects are removed through the topologies service first."""
    names = cluster_topology_names(cluster)
    if names and not confirm:
        raise Conflict(
            f"cluster {cluster.name} still runs {len(names)} topolog{'y' if len(names) == 1 else 'ies'}: "
            f"{', '.join(names)}; remove them first, or confirm to remove them with the cluster",
            code="cluster_in_use",
            fields={"confirm": ["set confirm=true to remove these topologies too"]},
        )
    if names:
        waiting = _remove_topologies(cluster, actor=actor, source_ip=source_ip)
        remaining = cluster_topology_names(cluster)
        if remaining:
            started = [name for name in remaining if name not in waiting]
            said = [f"removal of {', '.join(started)} has started"] if started else []
            said += [f"{name} waits: {why}" for name, why in waiting.items() if name in remaining]
            raise Conflict(
                f"{'; '.join(said)}; remove cluster {cluster.name} again once they are gone",
                code="cluster_in_use",
                fields={"confirm": ["wait for the topologies to be removed"]},
            )
    with transaction.atomic():
        pk, label = cluster.pk, cluster.name
        audit_record(
            action="cluster.delete",
            actor=actor,
            target=cluster,
            source_ip=source_ip,
            detail={"name": label, "topologies_removed": names},
        )
        cluster.delete()
    kube.forget(pk)
    logger.info("removed cluster %s", label)


def _remove_topologies(cluster: Cluster, *, actor: Any, source_ip: str | None) -> dict[str, str]:
    """Start the removal of every topology on the cluster (each a delete job that removes its objects,
    then the topology). Returns the topologies whose removal could not start yet, with the reason (a job
    of theirs, perhaps an earlier removal, is still running)."""
    from deployments.services import topology_delete_start

    waiting: dict[str, str] = {}
    for topology in list(cluster.topologies.all()):
        try:
            topology_delete_start(topology=topology, actor=actor, source_ip=source_ip)
        except Conflict as busy:
            waiting[topology.name] = busy.message
    return waiting
