"""A role's pod template, labelled with a content hash of what that role's pods run. Pure.

Pod templates carry no revision number. Their ``tandem.io/template-hash`` label hashes the template
itself plus the config files its pods read at start, so a revision that leaves a role alone (a scale of
the other role, a routing change) gives that role a byte-identical template: Kubernetes and Kthena
then leave its pods running, and only roles whose template really changed roll.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kube import labels
from topologies.render import engine, overlay
from topologies.spec import TopologySpec

HASH_LENGTH = 10


def template_hash(template: dict[str, Any], files: dict[str, str]) -> str:
    """Stable short hash of a pod template and the config files its pods read."""
    text = json.dumps({"files": files, "template": template}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def role_config_files(spec: TopologySpec, role: str) -> dict[str, str]:
    """The ConfigMap files a role's engine reads when it starts (changing them needs a restart)."""
    if role not in ("prefill", "decode") or not engine.needs_config_map(spec):
        return {}
    data: dict[str, str] = engine.config_map(spec, topology_id=0, revision=0)["data"]
    return {name: text for name, text in data.items() if name in ("mooncake.json", f"mindie-{role}.json")}


def pod_template(spec: TopologySpec, role: str, pod: dict[str, Any], *, topology_id: int) -> dict[str, Any]:
    """``{"metadata": {"labels": ...}, "spec": pod}`` with the role's overlay applied and its template
    hash among the labels (an overlay change rolls the role's pods)."""
    template: dict[str, Any] = {
        "metadata": {"labels": labels.pod_template_labels(topology_id, role)},
        "spec": pod,
    }
    if role in ("prefill", "decode"):  # the overlay of what the spec does not model (spec_overlay)
        template = overlay.apply(template, spec.role(role).pod_overlay)
    digest = template_hash(template, role_config_files(spec, role))
    template["metadata"]["labels"][labels.TEMPLATE_HASH] = digest
    return template
