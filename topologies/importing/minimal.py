"""The smallest overlay that renders the same objects: entries Tandem renders anyway are left out. Pure.

An import carries every unmodelled field of a role's pod template in its overlay. Many of them are what
Tandem renders itself (its /dev/shm volume, the Ascend /etc/hccn.conf mount, the readiness probe, the
HCCL interface env, an IfNotPresent pull policy): kept, they would make the spec say things twice.
``prune`` drops each such entry, and keeps the overlay as imported unless the render is then exactly
the same, so pruning can never change what runs.
"""

from __future__ import annotations

import copy
from typing import Any

from topologies.render import engine, render
from topologies.spec import SpecError, TopologySpec

KEYED = {"env": "name", "volumeMounts": "mountPath"}


def _prune_role(spec: dict[str, Any], role: str) -> None:
    overlay = spec["roles"][role].get("pod_overlay") or {}
    if not overlay:
        return
    bare = copy.deepcopy(spec)
    bare["roles"][role]["pod_overlay"] = {}
    pod = engine.pod_spec(TopologySpec.from_dict(bare), role)
    container = pod["containers"][0]
    own = overlay.get("engine") or {}
    for key in list(own):
        if key in KEYED:
            rendered = {item.get(KEYED[key]): item for item in container.get(key) or []}
            own[key] = [item for item in own[key] if rendered.get(item.get(KEYED[key])) != item]
            if not own[key]:
                del own[key]
        elif key != "name" and container.get(key) == own[key]:
            del own[key]
    pod_fields = overlay.get("spec") or {}
    if "volumes" in pod_fields:
        rendered = {v.get("name"): v for v in pod.get("volumes") or []}
        pod_fields["volumes"] = [v for v in pod_fields["volumes"] if rendered.get(v.get("name")) != v]
        if not pod_fields["volumes"]:
            del pod_fields["volumes"]
    spec["roles"][role]["pod_overlay"] = {k: v for k, v in overlay.items() if v}


def prune(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` (valid, as ``to_dict`` gives it) with each role's overlay reduced to what differs."""
    out = copy.deepcopy(spec)
    try:
        for role in ("prefill", "decode"):
            _prune_role(out, role)
        smaller = TopologySpec.from_dict(out)
    except SpecError:
        return spec
    same = render(smaller, topology_id=1, revision=1) == render(
        TopologySpec.from_dict(spec), topology_id=1, revision=1
    )
    return smaller.to_dict() if same else spec
