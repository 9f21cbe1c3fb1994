"""Applying a role's pod-template overlay (``spec_overlay``) to the rendered pod template. Pure.

Lists merge the way Kubernetes merges them (strategic merge keys): containers, init containers,
volumes and env by ``name``, volume mounts by ``mountPath``. An overlay entry replaces the rendered
entry with the same key in place, new entries are appended. A rendered volume that no container
mounts any more (the overlay mounted its own at the same path, e.g. its /dev/shm) is dropped. Other
fields are set from the overlay (a probe replaces Tandem's). Tandem's own labels always win.
"""

from __future__ import annotations

import copy
from typing import Any


def merge_keyed(
    rendered: list[dict[str, Any]], extra: list[dict[str, Any]], key: str
) -> list[dict[str, Any]]:
    out = [copy.deepcopy(item) for item in rendered]
    where = {item.get(key): i for i, item in enumerate(out)}
    for item in extra:
        if item.get(key) in where:
            out[where[item.get(key)]] = copy.deepcopy(item)
        else:
            where[item.get(key)] = len(out)
            out.append(copy.deepcopy(item))
    return out


def _engine(container: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        if key == "env":
            container["env"] = merge_keyed(container.get("env") or [], value, "name")
        elif key == "volumeMounts":
            container["volumeMounts"] = merge_keyed(container.get("volumeMounts") or [], value, "mountPath")
        else:
            container[key] = copy.deepcopy(value)


def _mounted(pod: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        names |= {str(m.get("name")) for m in container.get("volumeMounts") or []}
    return names


def apply(template: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``template`` ({"metadata", "spec"} with the engine container first) with ``overlay`` applied."""
    if not overlay:
        return template
    out = copy.deepcopy(template)
    meta = overlay.get("metadata") or {}
    if meta.get("labels"):
        out["metadata"]["labels"] = {**meta["labels"], **out["metadata"].get("labels", {})}
    if meta.get("annotations"):
        out["metadata"]["annotations"] = {**out["metadata"].get("annotations", {}), **meta["annotations"]}
    pod = out["spec"]
    _engine(pod["containers"][0], overlay.get("engine") or {})
    rendered_volumes = {str(v.get("name")) for v in pod.get("volumes") or []}
    for key, value in (overlay.get("spec") or {}).items():
        if key in ("containers", "initContainers", "volumes"):
            pod[key] = merge_keyed(pod.get(key) or [], value, "name")
        else:
            pod[key] = copy.deepcopy(value)
    overlaid = {str(v.get("name")) for v in (overlay.get("spec") or {}).get("volumes") or []}
    unused = (rendered_volumes - overlaid) - _mounted(pod)
    if unused:
        pod["volumes"] = [v for v in pod["volumes"] if v.get("name") not in unused]
    return out
