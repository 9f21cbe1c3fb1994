"""What every write checks and does before it reaches the store: the body names the URL's kind,
API version and namespace; the namespace exists and is not terminating; a resourceVersion in the
body is a precondition; and the object is decoded (built-in defaults, or the CRD's schema)."""

from __future__ import annotations

from typing import Any

from sandbox.apiserver.crd_schema import prepare_custom
from sandbox.apiserver.defaults import apply_builtin_defaults
from sandbox.apiserver.errors import ApiError, bad_request, conflict, not_found
from sandbox.apiserver.resources import ResourceType
from sandbox.apiserver.storage import Store


def check_identity(rt: ResourceType, body: dict[str, Any], namespace: str) -> None:
    """The body names the URL's kind, API version and namespace (set from the URL when absent)."""
    if not isinstance(body, dict):
        raise bad_request("the body of the request must be a JSON or YAML object")
    kind = body.get("kind")
    api_version = body.get("apiVersion")
    if api_version and api_version != rt.api_version:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({rt.api_version})"
        )
    if kind and kind != rt.kind:
        raise bad_request(f"kind {kind} does not match the expected kind {rt.kind}")
    meta = body.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if rt.namespaced:
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)


def check_namespace(store: Store, rt: ResourceType, namespace: str, creating: bool) -> None:
    """The namespace exists, and takes new objects only while it is not terminating."""
    if not rt.namespaced:
        return
    ns = store.peek("", "namespaces", "", namespace)
    if ns is None:
        raise not_found("namespaces", "", namespace)
    if creating and ns.get("status", {}).get("phase") == "Terminating":
        raise ApiError(
            403,
            "Forbidden",
            f'{rt.plural} "" is forbidden: unable to create new content in namespace {namespace} '
            "because it is being terminated",
            details={"name": "", "kind": rt.plural},
        )


def check_rv(rt: ResourceType, old: dict[str, Any], body: dict[str, Any]) -> None:
    """A resourceVersion in the body is a precondition: 409 when the stored object moved on."""
    rv = (body.get("metadata") or {}).get("resourceVersion")
    if rv and rv != old["metadata"]["resourceVersion"]:
        raise conflict(rt.plural, rt.group, old["metadata"]["name"])


def decode(rt: ResourceType, obj: dict[str, Any], strict: bool = False) -> dict[str, Any]:
    """The object as stored: kind and apiVersion set, built-in defaults or the CRD's schema applied."""
    obj["kind"] = rt.kind
    obj["apiVersion"] = rt.api_version
    if rt.custom:
        obj = prepare_custom(rt, obj, strict=strict)
    else:
        apply_builtin_defaults(rt.plural, obj)
    return obj
