"""Discovery documents: /version, /api, /apis, and the per group-version resource lists."""

from __future__ import annotations

import hashlib
from typing import Any

from sandbox.apiserver.resources import Registry, ResourceType

KUBE_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-tandem-sandbox"}


def version_info() -> dict[str, str]:
    return {
        **KUBE_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_entry(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(name, versions) for name, versions in registry.groups().items()],
    }


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.groups().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _storage_hash(rt: ResourceType) -> str:
    return hashlib.sha256(f"{rt.group}/{rt.version}/{rt.kind}".encode()).hexdigest()[:12]


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
        "storageVersionHash": _storage_hash(rt),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    entries = [main]
    sub_verbs = ["get", "patch", "update"]
    if rt.status:
        entries.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": sub_verbs,
            }
        )
    if rt.scale is not None:
        entries.append(
            {
                "name": f"{rt.plural}/scale",
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": sub_verbs,
            }
        )
    if rt.key == ("", "serviceaccounts"):
        entries.append(
            {
                "name": f"{rt.plural}/token",
                "singularName": "",
                "namespaced": True,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }
        )
    if rt.log:
        entries.append(
            {
                "name": f"{rt.plural}/log",
                "singularName": "",
                "namespaced": True,
                "kind": rt.kind,
                "verbs": ["get"],
            }
        )
    if not rt.group and rt.plural in ("pods", "services"):
        entries.append(
            {
                "name": f"{rt.plural}/proxy",
                "singularName": "",
                "namespaced": True,
                "kind": "PodProxyOptions" if rt.plural == "pods" else "ServiceProxyOptions",
                "verbs": ["create", "delete", "get", "patch", "update"],
            }
        )
    return entries


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in sorted(types, key=lambda t: t.plural):
        resources.extend(_resource_entries(rt))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
