"""The `scale` subresource (autoscaling/v1 Scale) of Deployments, ReplicaSets and CRDs that declare it."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from sandbox.apiserver.errors import ApiError, conflict
from sandbox.apiserver.meta import get_by_path, set_by_path
from sandbox.apiserver.resources import ResourceType
from sandbox.apiserver.selectors import selector_to_string

if TYPE_CHECKING:
    from sandbox.apiserver.objects import Api


def get_scale(api: Api, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
    assert rt.scale is not None
    obj = api.get(rt, namespace, name)
    meta = obj["metadata"]
    if rt.scale.label_selector:
        selector = get_by_path(obj, rt.scale.label_selector) or ""
    else:
        selector = selector_to_string(obj.get("spec", {}).get("selector"))
    status: dict[str, Any] = {"replicas": get_by_path(obj, rt.scale.status_replicas) or 0}
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": get_by_path(obj, rt.scale.spec_replicas) or 0},
        "status": status,
    }


def update_scale(
    api: Api, rt: ResourceType, namespace: str, name: str, scale: dict[str, Any], *, manager: str
) -> dict[str, Any]:
    assert rt.scale is not None
    replicas = (scale.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or replicas < 0:
        raise ApiError(
            422,
            "Invalid",
            f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: {replicas}: '
            "must be greater than or equal to 0",
            details={
                "name": name,
                "group": "autoscaling",
                "kind": "Scale",
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {replicas}: must be greater than or equal to 0",
                        "field": "spec.replicas",
                    }
                ],
            },
        )
    old = api.get(rt, namespace, name)
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv and rv != old["metadata"]["resourceVersion"]:
        raise conflict(rt.plural, rt.group, name)
    new = copy.deepcopy(old)
    set_by_path(new, rt.scale.spec_replicas, replicas)
    # managedFields name the writer and the subresource, as a real server's do: `kubectl scale` shows up
    # as {manager: kubectl, operation: Update, subresource: scale, fieldsV1: {f:spec: {f:replicas: {}}}}
    api.commit_update(rt, old, new, manager=manager, subresource="scale")
    return get_scale(api, rt, namespace, name)
