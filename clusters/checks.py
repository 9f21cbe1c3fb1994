"""What Tandem needs from a cluster, and how the facts of a check become a health state (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KTHENA_GROUPS = ("workload.serving.volcano.sh", "networking.serving.volcano.sh")
KTHENA_CRDS = (
    "modelservings.workload.serving.volcano.sh",
    "modelservers.networking.serving.volcano.sh",
    "modelroutes.networking.serving.volcano.sh",
)
_MANAGE = ("create", "patch", "delete", "get", "list", "watch")


@dataclass(frozen=True)
class Need:
    verb: str
    group: str
    resource: str
    why: str

    @property
    def kthena(self) -> bool:
        return self.group in KTHENA_GROUPS

    def label(self) -> str:
        group = f".{self.group}" if self.group else ""
        return f"{self.verb} {self.resource}{group}"


def _manage(group: str, resource: str, why: str) -> list[Need]:
    return [Need(verb, group, resource, why) for verb in _MANAGE]


# Every verb on every resource Tandem uses, cluster-wide (topologies may go to any namespace).
REQUIRED_ACCESS: tuple[Need, ...] = (
    *_manage("workload.serving.volcano.sh", "modelservings", "deploy P/D workloads with Kthena"),
    *_manage("networking.serving.volcano.sh", "modelservers", "route to the prefill/decode pools"),
    *_manage("networking.serving.volcano.sh", "modelroutes", "expose the served model name"),
    Need("patch", "workload.serving.volcano.sh", "modelservings/scale", "scale a role"),
    *_manage("apps", "deployments", "deploy P/D workloads without Kthena"),
    Need("patch", "apps", "deployments/scale", "scale a role"),
    *_manage("", "services", "give each role a stable address"),
    Need("get", "", "pods", "show pods and diagnose failures"),
    Need("list", "", "pods", "show pods and diagnose failures"),
    Need("watch", "", "pods", "wait for pods to become ready"),
    Need("get", "", "pods/log", "show why a pod crashed"),
    Need("list", "", "events", "explain scheduling and image failures"),
    Need("get", "", "namespaces", "check the target namespace exists"),
    Need("create", "", "namespaces", "create the target namespace"),
    Need("list", "", "nodes", "count accelerators"),
    Need("list", "apiextensions.k8s.io", "customresourcedefinitions", "detect Kthena"),
)


@dataclass(frozen=True)
class CheckFacts:
    """What one check learned. ``error`` set and ``reachable`` False: the cluster could not be used at all."""

    reachable: bool
    error: str = ""
    version: str = ""
    latency_ms: float | None = None
    crds: set[str] | None = None
    permissions: list[dict[str, Any]] = field(default_factory=list)
    nodes_total: int | None = None
    nodes_ready: int | None = None
    problems: list[str] = field(default_factory=list)  # partial failures while reachable

    @property
    def kthena_installed(self) -> bool | None:
        if self.crds is None:
            return None
        return all(name in self.crds for name in KTHENA_CRDS)


def assess(facts: CheckFacts) -> tuple[str, str]:
    """(health state, last error in words). Healthy needs every permission Tandem uses and a Ready node."""
    if not facts.reachable:
        return "unreachable", facts.error or "the cluster did not answer"
    reasons = list(facts.problems)
    denied = [
        p
        for p in facts.permissions
        if not p.get("allowed") and (facts.kthena_installed or not p.get("kthena"))
    ]
    if denied:
        shown = ", ".join(str(p["label"]) for p in denied[:6])
        more = f" and {len(denied) - 6} more" if len(denied) > 6 else ""
        reasons.append(
            f"Tandem's credentials may not {shown}{more}; bind a role granting these to its service account"
        )
    if facts.nodes_total == 0:
        reasons.append("the cluster has no nodes")
    elif facts.nodes_ready == 0 and facts.nodes_total:
        reasons.append(f"none of the {facts.nodes_total} nodes is Ready")
    if reasons:
        return "degraded", "; ".join(reasons)
    return "healthy", ""
