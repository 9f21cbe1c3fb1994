"""Talking to a cluster to learn about it: a quick probe (registration) and the full check's facts."""

from __future__ import annotations

import secrets
import time

import kube
from clusters.checks import REQUIRED_ACCESS, CheckFacts
from clusters.credentials import ConnectionResult, Credentials, field_for
from kube.client import PROBE_TIMEOUT
from kube.retry import RetryPolicy

# A person waits on the probe: one quick retry at most.
PROBE_POLICY = RetryPolicy(max_attempts=2, base_delay=0.2, max_delay=0.5)


def probe(conn: kube.ClusterConnection) -> ConnectionResult:
    """Version plus one authenticated call, with short timeouts: can Tandem use these credentials at all?"""
    started = time.monotonic()
    try:
        version = kube.get_version(conn, timeout=PROBE_TIMEOUT, policy=PROBE_POLICY)
        latency = (time.monotonic() - started) * 1000
        kube.access_review(conn, [("list", "", "pods", None)], timeout=PROBE_TIMEOUT)
    except kube.KubeError as exc:
        return ConnectionResult(ok=False, message=exc.message, error=exc)
    return ConnectionResult(ok=True, version=version, latency_ms=round(latency, 1))


def probe_credentials(creds: Credentials, name: str) -> tuple[ConnectionResult, str]:
    """Probe credentials that are not saved yet; the blamed form field comes back with a failure."""
    conn = creds.connection(cluster_id=-secrets.randbelow(2**31) - 1, name=name)
    try:
        result = probe(conn)
    finally:
        kube.forget(conn.cluster_id)
    return result, ("" if result.ok else field_for(result.error, creds.auth_method))


def gather_facts(conn: kube.ClusterConnection) -> tuple[CheckFacts, list[kube.NodeInfo]]:
    """Run every check against the cluster. Stops at the first error that makes the cluster unusable."""
    started = time.monotonic()
    try:
        version = kube.get_version(conn)
        latency = round((time.monotonic() - started) * 1000, 1)
        reviews = kube.access_review(conn, [(n.verb, n.group, n.resource, None) for n in REQUIRED_ACCESS])
    except (kube.KubeUnreachable, kube.KubeUnauthorized) as exc:
        return CheckFacts(reachable=False, error=exc.message), []
    except kube.KubeError as exc:
        return CheckFacts(reachable=False, error=exc.message), []
    permissions = []
    for need, result in zip(REQUIRED_ACCESS, reviews.values(), strict=True):
        permissions.append(
            {
                "verb": need.verb,
                "group": need.group,
                "resource": need.resource,
                "label": need.label(),
                "why": need.why,
                "kthena": need.kthena,
                "only_for": need.only_for,
                "allowed": result.allowed,
                "reason": result.reason,
            }
        )
    problems: list[str] = []
    crds: set[str] | None = None
    nodes: list[kube.NodeInfo] = []
    try:
        crds = kube.installed_crds(conn)
    except kube.KubeError as exc:
        problems.append(f"cannot list CRDs: {exc.message}")
    try:
        nodes = kube.list_nodes(conn)
    except kube.KubeError as exc:
        problems.append(f"cannot list nodes: {exc.message}")
    return (
        CheckFacts(
            reachable=True,
            version=version,
            latency_ms=latency,
            crds=crds,
            permissions=permissions,
            nodes_total=len(nodes) if not any("nodes" in p for p in problems) else None,
            nodes_ready=sum(1 for n in nodes if n.ready),
            problems=problems,
        ),
        nodes,
    )
