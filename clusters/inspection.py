"""Talking to a cluster to learn about it: a quick probe (registration) and the full check's facts."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence

import kube
from clusters.access import Need, rules_allow
from clusters.checks import REQUIRED_ACCESS, CheckFacts
from clusters.credentials import ConnectionResult, Credentials, field_for
from kube.client import probe_timeout
from kube.retry import RetryPolicy

# A person waits on the probe: one quick retry at most.
PROBE_POLICY = RetryPolicy(max_attempts=2, base_delay=0.2, max_delay=0.5)
# The periodic check's first call decides "reachable": two attempts, so a frozen API server is reported
# unreachable within about twice KUBE_PROBE_READ_TIMEOUT_SECONDS.
CHECK_POLICY = RetryPolicy(max_attempts=2, base_delay=0.5, max_delay=1.0)


def probe(conn: kube.ClusterConnection) -> ConnectionResult:
    """Version plus one authenticated call, with short timeouts: can Tandem use these credentials at all?"""
    started = time.monotonic()
    try:
        version = kube.get_version(conn, timeout=probe_timeout(), policy=PROBE_POLICY)
        latency = (time.monotonic() - started) * 1000
        kube.access_review(conn, [("list", "", "pods", None)], timeout=probe_timeout())
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


def review_needs(
    conn: kube.ClusterConnection,
    needs: Sequence[Need],
    *,
    namespace: str = "",
    cluster_wide: Callable[[Need], bool] = lambda need: True,
) -> dict[tuple[str, str, str], kube.AccessResult]:
    """May the credentials do each need (in ``namespace``, or cluster-wide where ``cluster_wide``)?

    One SelfSubjectRulesReview per scope settles every need its rules allow; only the others are asked
    one by one with SelfSubjectAccessReviews, which are authoritative (another authorizer may allow
    what RBAC rules do not list, and a rules review may be incomplete)."""
    scope_of = {n.key: ("" if cluster_wide(n) else namespace) for n in needs}
    results: dict[tuple[str, str, str], kube.AccessResult] = {}
    for scope in sorted(set(scope_of.values())):
        try:
            review = kube.rules_review(conn, scope)
        except kube.KubeForbidden:
            continue  # a credential that may not list its rules is asked need by need
        for need in needs:
            if scope_of[need.key] == scope and rules_allow(review.resource_rules, need):
                results[need.key] = kube.AccessResult(
                    True, f"allowed by the rules held in {scope or 'the cluster'}"
                )
    rest = [n for n in needs if n.key not in results]
    checks = [kube.AccessCheck(n.verb, n.group, n.resource, scope_of[n.key] or None) for n in rest]
    reviews = kube.access_review(conn, checks, timeout=probe_timeout()) if checks else {}
    for need, check in zip(rest, checks, strict=True):
        results[need.key] = reviews[check]
    return results


def gather_facts(conn: kube.ClusterConnection) -> tuple[CheckFacts, list[kube.NodeInfo]]:
    """Run every check against the cluster. Stops at the first error that makes the cluster unusable."""
    started = time.monotonic()
    try:
        version = kube.get_version(conn, policy=CHECK_POLICY)
        latency = round((time.monotonic() - started) * 1000, 1)
        reviews = review_needs(conn, REQUIRED_ACCESS)
    except (kube.KubeUnreachable, kube.KubeUnauthorized) as exc:
        return CheckFacts(reachable=False, error=exc.message), []
    except kube.KubeError as exc:
        return CheckFacts(reachable=False, error=exc.message), []
    permissions = []
    for need in REQUIRED_ACCESS:
        result = reviews[need.key]
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
