"""What Tandem needs from a cluster, and how the facts of a check become a health state (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusters.access import KTHENA_GROUPS, REQUIRED_ACCESS, Need, rule_snippet

__all__ = ["KTHENA_CRDS", "KTHENA_GROUPS", "REQUIRED_ACCESS", "CheckFacts", "Need", "assess", "missing_rules"]

KTHENA_CRDS = (
    "modelservings.workload.serving.volcano.sh",
    "modelservers.networking.serving.volcano.sh",
    "modelroutes.networking.serving.volcano.sh",
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
        if not p.get("allowed") and not p.get("only_for") and (facts.kthena_installed or not p.get("kthena"))
    ]
    if denied:
        shown = ", ".join(str(p["label"]) for p in denied[:6])
        more = f" and {len(denied) - 6} more" if len(denied) > 6 else ""
        reasons.append(
            f"Tandem's credentials may not {shown}{more}; add these rules to the ClusterRole bound to its "
            f"service account:\n{missing_rules(denied)}"
        )
    if facts.nodes_total == 0:
        reasons.append("the cluster has no nodes")
    elif facts.nodes_ready == 0 and facts.nodes_total:
        reasons.append(f"none of the {facts.nodes_total} nodes is Ready")
    if reasons:
        return "degraded", "; ".join(reasons)
    return "healthy", ""


def missing_rules(permissions: list[dict[str, Any]]) -> str:
    """The RBAC rules (YAML) granting the denied entries of a check's ``permissions``."""
    return rule_snippet(
        Need(str(p.get("verb", "")), str(p.get("group", "")), str(p.get("resource", "")), "")
        for p in permissions
        if not p.get("allowed")
    )
