"""Pure facts about a revision's manifests: pods it runs, what it asks of the nodes, what to prune.

A revision's pods are found by topology, role and template hash (``tandem.io/template-hash``), not by
revision number: pods whose role template did not change between two revisions belong to both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kube.labels import MANAGED_BY, MANAGED_BY_VALUE, REVISION, ROLE, TEMPLATE_HASH, TOPOLOGY

Manifest = Mapping[str, Any]
POD_WORKLOADS = {"Deployment", "StatefulSet", "ReplicaSet"}


def object_key(obj: Manifest) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta["name"]),
    )


def key_text(key: tuple[str, str, str, str]) -> str:
    return f"{key[1]}/{key[3]}"


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _pod_templates(obj: Manifest) -> list[tuple[int, Mapping[str, Any]]]:
    """(pod count, pod template) pairs for one workload object; empty for objects that run no pods."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind in POD_WORKLOADS:
        return [(_int(spec.get("replicas"), 1), spec.get("template") or {})]
    if kind == "ModelServing":
        groups = _int(spec.get("replicas"), 1)
        out: list[tuple[int, Mapping[str, Any]]] = []
        for role in (spec.get("template") or {}).get("roles") or []:
            replicas = _int(role.get("replicas"), 1) * groups
            out.append((replicas, role.get("entryTemplate") or {}))
            if role.get("workerTemplate"):
                workers = _int(role.get("workerReplicas"), 0)
                out.append((replicas * workers, role.get("workerTemplate") or {}))
        return out
    return []


def is_workload(obj: Manifest) -> bool:
    """Objects whose controller runs pods and reports rollout status (Deployment, ModelServing, ...)."""
    return obj.get("kind") in POD_WORKLOADS or obj.get("kind") == "ModelServing"


def expected_pods(manifests: Iterable[Manifest]) -> int:
    """How many pods the revision runs once everything is Ready."""
    return sum(count for obj in manifests for count, _ in _pod_templates(obj))


@dataclass(frozen=True)
class PodSet:
    """Pods of one role running one template: ``count`` of them are expected.

    Revisions rendered before templates were hashed carry the revision number in their pod templates
    instead (``legacy_revision``); their pods are found by it.
    """

    role: str
    template_hash: str
    count: int
    legacy_revision: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if labels.get(ROLE) != self.role:
            return False
        if self.template_hash:
            return labels.get(TEMPLATE_HASH) == self.template_hash
        return bool(self.legacy_revision) and labels.get(REVISION) == self.legacy_revision


def pod_sets(manifests: Iterable[Manifest]) -> list[PodSet]:
    """The revision's pods grouped by role and template hash, in manifest order."""
    counts: dict[tuple[str, str, str], int] = {}
    for obj in manifests:
        for count, template in _pod_templates(obj):
            labels = (template.get("metadata") or {}).get("labels") or {}
            digest = str(labels.get(TEMPLATE_HASH, ""))
            key = (str(labels.get(ROLE, "")), digest, "" if digest else str(labels.get(REVISION, "")))
            counts[key] = counts.get(key, 0) + count
    return [PodSet(role, digest, count, legacy) for (role, digest, legacy), count in counts.items()]


def template_hashes(manifests: Iterable[Manifest]) -> dict[str, str]:
    """Role → template hash of the revision's pods."""
    return {s.role: s.template_hash for s in pod_sets(manifests)}


def requested_resources(manifests: Iterable[Manifest]) -> dict[str, int]:
    """Total extended-resource requests (accelerators) over every pod of the revision."""
    totals: dict[str, int] = {}
    for obj in manifests:
        for count, template in _pod_templates(obj):
            for container in (template.get("spec") or {}).get("containers") or []:
                resources = container.get("resources") or {}
                asked = resources.get("requests") or resources.get("limits") or {}
                for name, value in asked.items():
                    if "/" in name:
                        totals[name] = totals.get(name, 0) + _int(value, 0) * count
    return totals


def prune_keys(old: Iterable[Manifest], new: Iterable[Manifest]) -> list[tuple[str, str, str, str]]:
    """Objects of the old revision that the new one no longer has, in delete order (reverse of apply)."""
    keep = {object_key(obj) for obj in new}
    seen: list[tuple[str, str, str, str]] = []
    for obj in old:
        key = object_key(obj)
        if key not in keep and key not in seen:
            seen.append(key)
    return list(reversed(seen))


def owned_by_topology(obj: Mapping[str, Any] | None, topology_id: int) -> bool:
    """True when a live object carries Tandem's labels for this topology (safe to delete)."""
    if not obj:
        return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == MANAGED_BY_VALUE and labels.get(TOPOLOGY) == str(topology_id)
