"""When is a revision running? Pure judgements over what the cluster reports.

A revision is Ready when every workload it applies (Deployment, ModelServing, ...) reports that its
controller has seen the latest generation and finished rolling it out, AND the pods it expects (by
topology, role and template hash) are Ready. Pods alone are not enough: right after an apply, the old
pods of an unchanged template are Ready before the controller has even seen the new spec.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from deployments.plan import PodSet


class PodLike(Protocol):
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def ready(self) -> bool: ...
    @property
    def deletion_pending(self) -> bool: ...


P = TypeVar("P", bound=PodLike)


@dataclass(frozen=True)
class WorkloadProgress:
    key: str  # "Deployment/name"
    done: bool
    text: str  # what is still missing, in words ("" when done)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def workload_progress(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> WorkloadProgress:
    """Whether one workload finished rolling out its latest spec, from its live status."""
    kind = str(desired.get("kind", ""))
    key = f"{kind}/{(desired.get('metadata') or {}).get('name', '?')}"
    if live is None:
        return WorkloadProgress(key, False, f"{key} does not exist yet")
    meta = live.get("metadata") or {}
    status = live.get("status") or {}
    spec = live.get("spec") or {}
    generation = _int(meta.get("generation")) or 1
    observed = _int(status.get("observedGeneration"))
    if observed < generation:
        return WorkloadProgress(
            key, False, f"{key}: its controller has not seen generation {generation} yet (at {observed})"
        )
    want = _int(spec.get("replicas", 1))
    updated = _int(status.get("updatedReplicas"))
    current = _int(status.get("replicas"))
    if kind == "ModelServing":
        ready = _int(status.get("availableReplicas"))
        unit = "serving groups"
        revisions = (status.get("currentRevision"), status.get("updateRevision"))
        if all(revisions) and revisions[0] != revisions[1]:
            return WorkloadProgress(key, False, f"{key}: rolling from {revisions[0]} to {revisions[1]}")
    else:
        ready = _int(status.get("readyReplicas"))
        unit = "replicas"
    if updated == ready == current == want:
        return WorkloadProgress(key, True, "")
    return WorkloadProgress(
        key, False, f"{key}: {updated}/{want} {unit} updated, {ready} ready, {current} running"
    )


def pods_of(pods: Iterable[P], sets: Sequence[PodSet]) -> list[P]:
    """The live pods (not being deleted) that belong to one of the revision's pod sets."""
    return [p for p in pods if not p.deletion_pending and any(s.matches(p.labels) for s in sets)]


def ready_pods(pods: Iterable[PodLike], sets: Sequence[PodSet]) -> int:
    """Ready pods of the revision, each set counted up to the number it expects."""
    live = [p for p in pods if p.ready and not p.deletion_pending]
    return sum(min(s.count, sum(1 for p in live if s.matches(p.labels))) for s in sets)
