"""Just enough OpenAPI v3 for kubectl: the per group-version documents it reads to learn that the
server validates fields itself (`fieldValidation` on every write operation), plus the custom
resources' schemas so `kubectl explain` works for them. Built-in kinds carry no schema here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sandbox.apiserver.resources import Registry, ResourceType

_WRITE_PARAMS = [
    {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _schema_name(rt: ResourceType) -> str:
    reversed_group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{reversed_group}.{rt.version}.{rt.kind}"


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _operation(rt: ResourceType, action: str) -> dict[str, Any]:
    return {
        "operationId": f"{action}{rt.kind}",
        "parameters": _WRITE_PARAMS,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt),
    }


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in types:
        base = f"/{_gv_path(group, version)}" + ("/namespaces/{namespace}" if rt.namespaced else "")
        paths[f"{base}/{rt.plural}"] = {"post": _operation(rt, "post")}
        paths[f"{base}/{rt.plural}/{{name}}"] = {
            "put": _operation(rt, "put"),
            "patch": _operation(rt, "patch"),
        }
        if rt.schema is not None:
            schemas[_schema_name(rt)] = {**rt.schema, "x-kubernetes-group-version-kind": [_gvk(rt)]}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-tandem-sandbox"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def root_document(registry: Registry) -> dict[str, Any]:
    gvs = {(rt.group, rt.version) for rt in registry.types()}
    paths = {}
    for group, version in sorted(gvs):
        doc = group_version_document(registry, group, version)
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
        path = _gv_path(group, version)
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}
