"""Owner-reference garbage collection: dependents follow their owner (background), or are orphaned."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.resources import ResourceType

if TYPE_CHECKING:
    from sandbox.apiserver.objects import Api


def dependents(api: Api, uid: str) -> list[tuple[ResourceType, dict[str, Any]]]:
    found = []
    for rt in api.registry.types():
        if not rt.namespaced:
            continue
        for obj in api.store.iter(rt.group, rt.plural):
            refs = obj["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == uid for ref in refs):
                found.append((rt, obj))
    return found


def collect_dependents(api: Api, uid: str) -> None:
    for rt, obj in dependents(api, uid):
        meta = obj["metadata"]
        remaining = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
        if remaining:
            continue
        try:
            api.delete(rt, meta.get("namespace", ""), meta["name"])
        except ApiError:
            continue


def orphan(api: Api, uid: str) -> None:
    for rt, obj in dependents(api, uid):
        new = copy.deepcopy(obj)
        new["metadata"]["ownerReferences"] = [
            r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != uid
        ]
        api.commit_update(rt, obj, new, manager=None)
