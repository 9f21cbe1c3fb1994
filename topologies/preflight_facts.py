"""What preflight reads and what it answers: cluster facts gathered through ``kube``, and findings.

Plain data, so the checks in ``topologies.preflight`` are tested with facts built by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    level: str  # error blocks a deploy, warning informs
    code: str
    field: str  # spec field path the finding is about ("" for the cluster as a whole)
    message: str
    fix: str

    @property
    def blocking(self) -> bool:
        return self.level == ERROR

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NodeFacts:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    ready: bool = True
    unschedulable: bool = False
    allocatable: dict[str, int] = field(default_factory=dict)
    in_use: dict[str, int] = field(default_factory=dict)

    def free(self, resource: str) -> int:
        return max(0, self.allocatable.get(resource, 0) - self.in_use.get(resource, 0))

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable


@dataclass(frozen=True)
class ObjectFacts:
    kind: str
    namespace: str
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = ()


@dataclass(frozen=True)
class ClusterFacts:
    reachable: bool = True
    error: str = ""
    crds: frozenset[str] = frozenset()
    nodes: tuple[NodeFacts, ...] = ()
    namespace_exists: bool = True
    can_create_namespace: bool = True
    # Live objects with the same kind/namespace/name as the ones the spec renders.
    objects: tuple[ObjectFacts, ...] = ()
    # Services relevant to the connector backend (e.g. the Mooncake master's).
    services: tuple[ObjectFacts, ...] = ()
    # Accelerators this topology's own running pods hold, per node (free again when it redeploys).
    own_in_use: dict[str, dict[str, int]] = field(default_factory=dict)
    # (verb, API group, resource) the cluster denies Tandem (access reviews in the target namespace).
    denied: frozenset[tuple[str, str, str]] = frozenset()
    # True when reads were skipped because a permission is missing: only the spec's own checks and
    # the permission findings are meaningful then.
    partial: bool = False
