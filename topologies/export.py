"""Export: a revision's manifests as one ``kubectl apply``-ready YAML stream, and its spec as YAML."""

from __future__ import annotations

import yaml

from topologies.models import Revision
from topologies.render import to_yaml

EXPORTS = ("manifests", "spec")


def revision_yaml(revision: Revision, what: str) -> tuple[str, str]:
    """(YAML text, file name) of ``what`` ("manifests" or "spec") of the revision."""
    name = f"{revision.topology.name}-r{revision.number}"
    if what == "manifests":
        header = f"# {revision.topology.name} revision {revision.number}: kubectl apply -f {name}.yaml\n"
        return header + to_yaml(list(revision.manifests)), f"{name}.yaml"
    if what == "spec":
        text = yaml.safe_dump(revision.spec, sort_keys=False, default_flow_style=False, width=4096)
        return text, f"{name}-spec.yaml"
    raise ValueError(f"no export named {what}; use one of: {', '.join(EXPORTS)}")
