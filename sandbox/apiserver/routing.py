"""Kubernetes API paths: `/version` and the health checks, the OpenAPI v3 documents, the discovery
documents, and a resource path read into its `Target` (resource type, namespace, name, subresource,
watch, proxy)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from sandbox.apiserver import discovery, openapi
from sandbox.apiserver import proxy as proxying
from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.resources import Registry, ResourceType
from sandbox.apiserver.respond import json_response

PROXIED = frozenset({"pods", "services"})


@dataclass(frozen=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str
    watch_path: bool
    proxy_name: str = ""  # `proxy` subresource: the `[scheme:]name[:port]` segment
    proxy_path: str = ""  # and the path after `/proxy/`


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def route(registry: Registry, path: str, server_address: str) -> web.Response | Target:
    """The answer of a path that names no resource (version, health, OpenAPI, discovery), or the
    `Target` of one that does; 404 for any other."""
    if path in ("/version", "/version/"):
        return json_response(discovery.version_info())
    if path in ("/healthz", "/livez", "/readyz"):
        return web.Response(text="ok")
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["openapi", "v3"]:
        return _openapi(registry, parts[2:])
    if not parts or parts[0] not in ("api", "apis"):
        raise _not_found()
    if parts[0] == "api":
        if len(parts) == 1:
            return json_response(discovery.api_versions(server_address))
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) == 1:
            return json_response(discovery.api_group_list(registry))
        if len(parts) == 2:
            doc = discovery.api_group(registry, parts[1])
            if doc is None:
                raise _not_found()
            return json_response(doc)
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        doc = discovery.resource_list(registry, group, version)
        if doc is None:
            raise _not_found()
        return json_response(doc)
    return target(registry, group, version, rest, trailing_slash=path.endswith("/"))


def _openapi(registry: Registry, rest: list[str]) -> web.Response:
    if not rest:
        return json_response(openapi.root_document(registry))
    if rest[0] == "api" and len(rest) == 2:
        doc = openapi.group_version_document(registry, "", rest[1])
    elif rest[0] == "apis" and len(rest) == 3:
        doc = openapi.group_version_document(registry, rest[1], rest[2])
    else:
        doc = None
    if doc is None:
        raise _not_found()
    return json_response(doc)


def target(
    registry: Registry, group: str, version: str, rest: list[str], *, trailing_slash: bool = False
) -> Target:
    """What the path after `/api/<version>` or `/apis/<group>/<version>` names."""
    watch_path = rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rt = registry.lookup(group, version, rest[2])
        if rt is not None and rt.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest:
        raise _not_found()
    rt = registry.lookup(group, version, rest[0])
    if rt is not None and len(rest) >= 3 and rest[2] == "proxy" and rt.plural in PROXIED:
        tail = "/".join(rest[3:]) + ("/" if trailing_slash and len(rest) > 3 else "")
        wanted = proxying.split_name(rest[1])
        return Target(rt, namespace, wanted.name, "proxy", watch_path, rest[1], tail)
    if rt is None or len(rest) > 3:
        raise _not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    allowed_sub = {
        "status": rt.status,
        "scale": rt.scale is not None,
        "log": rt.log,
        "token": rt.key == ("", "serviceaccounts"),
        "": True,
    }
    if not allowed_sub.get(sub, False):
        raise _not_found()
    return Target(rt, namespace, name, sub, watch_path)
