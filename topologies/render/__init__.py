"""Renderers: pure functions from a validated spec to the Kubernetes objects of one revision.

``render(spec, topology_id=..., revision=...)`` returns the objects in apply order (config first,
workloads next, routing last); ``to_yaml`` gives their stable YAML form (sorted keys), used for
golden files and revision diffs.
"""

from __future__ import annotations

from typing import Any

import yaml

from topologies.render import kthena, plain
from topologies.spec import TopologySpec


def render(spec: TopologySpec, *, topology_id: int, revision: int) -> list[dict[str, Any]]:
    if spec.backend == "kthena":
        return kthena.render(spec, topology_id=topology_id, revision=revision)
    return plain.render(spec, topology_id=topology_id, revision=revision)


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{obj.get('kind')}/{meta.get('namespace', '')}/{meta.get('name')}"


def to_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=True, default_flow_style=False, width=4096)
