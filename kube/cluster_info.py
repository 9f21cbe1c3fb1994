"""Facts about a cluster as a whole: version, installed CRDs, what we may do, nodes and accelerators."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.utils import parse_quantity

from kube.client import ClusterConnection, probe_timeout, request
from kube.errors import KubeError
from kube.retry import DEFAULT_POLICY, RetryPolicy

# Resource names with a slash that are not accelerators.
_STANDARD_DOMAINS = ("kubernetes.io", "k8s.io")


def is_accelerator_resource(name: str) -> bool:
    """Extended resources with a vendor domain (``nvidia.com/gpu``, ``huawei.com/Ascend910``)."""
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not any(domain == d or domain.endswith("." + d) for d in _STANDARD_DOMAINS)


def quantity_int(value: Any) -> int:
    """Whole units of a quantity (extended resources are always integers); 0 when unparseable."""
    try:
        return int(parse_quantity(str(value)))
    except (ValueError, TypeError, ArithmeticError):
        return 0


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: dict[str, str]
    ready: bool
    unschedulable: bool
    # Per accelerator resource name: whole units.
    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    in_use: dict[str, int] = field(default_factory=dict)

    @property
    def accelerators(self) -> list[str]:
        return sorted(set(self.capacity) | set(self.allocatable))


def get_version(
    conn: ClusterConnection,
    *,
    timeout: tuple[float, float] | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> str:
    """``gitVersion`` from ``/version`` (e.g. "v1.31.2")."""
    timeout = timeout or probe_timeout()
    data = (
        request(conn, "GET", "/version", action="read the version", timeout=timeout, policy=policy).json()
        or {}
    )
    return str(data.get("gitVersion") or f"v{data.get('major', '?')}.{data.get('minor', '?')}")


def installed_crds(conn: ClusterConnection) -> set[str]:
    """Names of installed CustomResourceDefinitions (``modelservings.workload.serving.volcano.sh``, ...)."""
    response = request(
        conn,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        action="list CustomResourceDefinitions",
    )
    return {str((i.get("metadata") or {}).get("name")) for i in (response.json() or {}).get("items") or []}


@dataclass(frozen=True)
class AccessCheck:
    verb: str
    group: str
    resource: str  # may carry a subresource: "pods/log"
    namespace: str | None = None


@dataclass(frozen=True)
class AccessResult:
    allowed: bool
    reason: str = ""


def access_review(
    conn: ClusterConnection,
    checks: Sequence[tuple[str, str, str, str | None] | AccessCheck],
    *,
    timeout: tuple[float, float] | None = None,
) -> dict[AccessCheck, AccessResult]:
    """One SelfSubjectAccessReview per check: may the current credentials ``verb`` the resource?"""
    results: dict[AccessCheck, AccessResult] = {}
    for raw in checks:
        check = raw if isinstance(raw, AccessCheck) else AccessCheck(*raw)
        resource, _, subresource = check.resource.partition("/")
        attrs: dict[str, Any] = {"verb": check.verb, "group": check.group, "resource": resource}
        if subresource:
            attrs["subresource"] = subresource
        if check.namespace:
            attrs["namespace"] = check.namespace
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        kwargs: dict[str, Any] = {"timeout": timeout} if timeout else {}
        response = request(
            conn,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            body=body,
            action=f"review access to {check.verb} {check.resource}",
            **kwargs,
        )
        status = (response.json() or {}).get("status") or {}
        results[check] = AccessResult(
            bool(status.get("allowed")), str(status.get("reason") or status.get("evaluationError") or "")
        )
    return results


@dataclass(frozen=True)
class RulesReview:
    """What a SelfSubjectRulesReview lists: rules that allow (never deny); ``incomplete`` when an
    authorizer could not enumerate its rules."""

    resource_rules: tuple[dict[str, Any], ...]
    incomplete: bool
    evaluation_error: str = ""


def rules_review(conn: ClusterConnection, namespace: str) -> RulesReview:
    """One SelfSubjectRulesReview: the rules the current credentials hold in ``namespace`` ("" for
    cluster-wide bindings only)."""
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace} if namespace else {},
    }
    response = request(
        conn,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        body=body,
        action=f"review the rules held in {namespace or 'the cluster'}",
    )
    status = (response.json() or {}).get("status") or {}
    rules = tuple(r for r in status.get("resourceRules") or [] if isinstance(r, dict))
    return RulesReview(rules, bool(status.get("incomplete")), str(status.get("evaluationError") or ""))


def node_info(node: dict[str, Any], in_use: dict[str, int] | None = None) -> NodeInfo:
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    capacity = {
        k: quantity_int(v) for k, v in (status.get("capacity") or {}).items() if is_accelerator_resource(k)
    }
    allocatable = {
        k: quantity_int(v) for k, v in (status.get("allocatable") or {}).items() if is_accelerator_resource(k)
    }
    names = set(capacity) | set(allocatable)
    return NodeInfo(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        ready=ready,
        unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
        capacity=capacity,
        allocatable=allocatable,
        in_use={k: (in_use or {}).get(k, 0) for k in names},
    )


def accelerator_requests_by_node(pods: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Sum of accelerator requests of non-terminated pods, per node (pure)."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        spec = pod.get("spec") or {}
        app_totals: dict[str, int] = {}
        for c in spec.get("containers") or []:
            resources = c.get("resources") or {}
            requested = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            for name, value in requested.items():
                if is_accelerator_resource(name):
                    app_totals[name] = app_totals.get(name, 0) + quantity_int(value)
        # Init containers run one at a time before the app containers: the pod holds the larger of the two.
        for c in spec.get("initContainers") or []:
            resources = c.get("resources") or {}
            requested = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            for name, value in requested.items():
                if is_accelerator_resource(name):
                    app_totals[name] = max(app_totals.get(name, 0), quantity_int(value))
        per_node = used.setdefault(str(node), {})
        for name, amount in app_totals.items():
            per_node[name] = per_node.get(name, 0) + amount
    return used


def list_nodes(conn: ClusterConnection) -> list[NodeInfo]:
    """Every node with its accelerator capacity, allocatable and in-use counts."""
    nodes = (request(conn, "GET", "/api/v1/nodes", action="list nodes").json() or {}).get("items") or []
    pods = (
        request(
            conn,
            "GET",
            "/api/v1/pods",
            query={"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
            action="list pods in all namespaces",
        ).json()
        or {}
    ).get("items") or []
    used = accelerator_requests_by_node(pods)
    return sorted(
        (node_info(n, used.get(str((n.get("metadata") or {}).get("name")), {})) for n in nodes),
        key=lambda n: n.name,
    )


__all__ = [
    "AccessCheck",
    "AccessResult",
    "KubeError",
    "NodeInfo",
    "RulesReview",
    "access_review",
    "get_version",
    "installed_crds",
    "list_nodes",
    "rules_review",
]
