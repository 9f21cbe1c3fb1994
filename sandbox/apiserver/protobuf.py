"""Decoding of the protobuf bodies kubectl's imperative generators send, for the simple kinds.

`kubectl create namespace|configmap|secret|serviceaccount|token|role|clusterrole|rolebinding|
clusterrolebinding` and `kubectl auth can-i` encode their object as
`application/vnd.kubernetes.protobuf`: the magic `k8s\\0`, then a `runtime.Unknown` message
(1: TypeMeta{1: apiVersion, 2: kind}, 2: raw object bytes). Only the fields those commands set
are decoded (ObjectMeta name/generateName/namespace/labels/annotations, ConfigMap and Secret
data). Other kinds answer 415 and kubectl users apply a manifest instead.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

MAGIC = b"k8s\x00"
Field = tuple[int, int, Any]  # number, wire type, value (int or bytes)


class ProtobufError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> Iterator[Field]:
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            yield number, wire, data[pos : pos + length]
            pos += length
        elif wire == 1:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == 5:
            yield number, wire, data[pos : pos + 4]
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _map_entry(data: bytes, as_bytes: bool = False) -> tuple[str, Any]:
    key, value = "", b"" if as_bytes else ""
    for number, _, raw in fields(data):
        if number == 1:
            key = raw.decode()
        elif number == 2:
            value = raw if as_bytes else raw.decode()
    return key, value


def _object_meta(data: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    names = {1: "name", 2: "generateName", 3: "namespace"}
    for number, _, raw in fields(data):
        if number in names and raw:
            meta[names[number]] = raw.decode()
        elif number in (11, 12):
            key, value = _map_entry(raw)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = value
    return meta


def _decode_object(kind: str, raw: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, wire, value in fields(raw):
        if number == 1:
            obj["metadata"] = _object_meta(value)
        elif kind == "ConfigMap" and number in (2, 3):
            key, item = _map_entry(value, as_bytes=number == 3)
            if number == 2:
                obj.setdefault("data", {})[key] = item
            else:
                obj.setdefault("binaryData", {})[key] = base64.b64encode(item).decode()
        elif kind == "ConfigMap" and number == 4 and wire == 0:
            obj["immutable"] = bool(value)
        elif kind == "Secret" and number == 2:
            key, item = _map_entry(value, as_bytes=True)
            obj.setdefault("data", {})[key] = base64.b64encode(item).decode()
        elif kind == "Secret" and number == 3:
            obj["type"] = value.decode()
        elif kind == "Secret" and number == 4:
            key, item = _map_entry(value)
            obj.setdefault("stringData", {})[key] = item
        elif kind == "ServiceAccount" and number == 4 and wire == 0:
            obj["automountServiceAccountToken"] = bool(value)
        elif kind == "SelfSubjectAccessReview" and number == 2:
            obj["spec"] = _review_spec(value)
        elif kind == "SelfSubjectRulesReview" and number == 2:
            obj["spec"] = _strings(value, {1: "namespace"})
        elif kind == "TokenRequest" and number == 2:
            obj["spec"] = _token_request_spec(value)
        elif kind in ("RoleBinding", "ClusterRoleBinding") and number == 2:
            obj.setdefault("subjects", []).append(
                _strings(value, {1: "kind", 2: "apiGroup", 3: "name", 4: "namespace"})
            )
        elif kind in ("RoleBinding", "ClusterRoleBinding") and number == 3:
            obj["roleRef"] = _strings(value, {1: "apiGroup", 2: "kind", 3: "name"})
        elif kind in ("Role", "ClusterRole") and number == 2:
            obj.setdefault("rules", []).append(_policy_rule(value))
    return obj


_RESOURCE_ATTRIBUTES = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}


def _review_spec(data: bytes) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for number, _, raw in fields(data):
        if number == 1:
            attributes = {
                _RESOURCE_ATTRIBUTES[sub]: text.decode()
                for sub, _, text in fields(raw)
                if sub in _RESOURCE_ATTRIBUTES and text
            }
            spec["resourceAttributes"] = attributes
        elif number == 2:
            spec["nonResourceAttributes"] = {
                ("path" if sub == 1 else "verb"): text.decode()
                for sub, _, text in fields(raw)
                if sub in (1, 2)
            }
    return spec


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    return {names[n]: v.decode() for n, _, v in fields(data) if n in names and v}


def _policy_rule(data: bytes) -> dict[str, list[str]]:
    """PolicyRule: 1 verbs, 2 apiGroups, 3 resources, 4 resourceNames, 5 nonResourceURLs (all repeated)."""
    names = {1: "verbs", 2: "apiGroups", 3: "resources", 4: "resourceNames", 5: "nonResourceURLs"}
    rule: dict[str, list[str]] = {}
    for number, _, value in fields(data):
        if number in names:
            rule.setdefault(names[number], []).append(value.decode())
    return rule


def _token_request_spec(data: bytes) -> dict[str, Any]:
    """TokenRequestSpec: 1 audiences (repeated), 3 boundObjectRef, 4 expirationSeconds."""
    spec: dict[str, Any] = {}
    for number, wire, value in fields(data):
        if number == 1:
            spec.setdefault("audiences", []).append(value.decode())
        elif number == 4 and wire == 0:
            spec["expirationSeconds"] = value
        elif number == 3:
            names = {1: "kind", 2: "apiVersion", 3: "name", 4: "uid"}
            spec["boundObjectRef"] = {names[n]: v.decode() for n, _, v in fields(value) if n in names}
    return spec


SUPPORTED = (
    "Namespace",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "SelfSubjectAccessReview",
    "SelfSubjectRulesReview",
    "TokenRequest",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
)


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, for the kinds in `SUPPORTED`."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    api_version = kind = ""
    raw = b""
    for number, _, value in fields(body[len(MAGIC) :]):
        if number == 1:
            for sub, _, text in fields(value):
                if sub == 1:
                    api_version = text.decode()
                elif sub == 2:
                    kind = text.decode()
        elif number == 2:
            raw = value
    if kind not in SUPPORTED:
        raise ProtobufError(
            f"protobuf bodies are decoded for {', '.join(SUPPORTED)} only, not {kind or 'this kind'}"
        )
    return {"apiVersion": api_version, "kind": kind, **_decode_object(kind, raw)}
