"""Label selectors (equality and set-based) and field selectors, parsed like the API server does."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.apiserver.errors import ApiError, bad_request

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        return not present


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _check_key(key: str, whole: str) -> str:
    if not _KEY.match(key) or len(key.split("/")[-1]) > 63:
        raise bad_request(
            f'unable to parse requirement: invalid label key "{key}": name part must consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            f"character (in selector {whole!r})"
        )
    return key


def _check_value(value: str, whole: str) -> str:
    if not _VALUE.match(value) or len(value) > 63:
        raise bad_request(
            f'unable to parse requirement: invalid label value: "{value}": a valid label must be an '
            "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and "
            f"end with an alphanumeric character (in selector {whole!r})"
        )
    return value


_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (x,y),f notin (z),g,!h`; raises a 400 `ApiError` when malformed."""
    if not text:
        return []
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        set_match = _SET_RE.match(part)
        if set_match:
            key, op, raw_values = set_match.groups()
            values = tuple(_check_value(v.strip(), text) for v in raw_values.split(",") if v.strip())
            requirements.append(Requirement(_check_key(key, text), op, values))
        elif "!=" in part:
            key, value = (s.strip() for s in part.split("!=", 1))
            requirements.append(Requirement(_check_key(key, text), "!=", (_check_value(value, text),)))
        elif "==" in part or "=" in part:
            key, value = (s.strip() for s in re.split("==|=", part, maxsplit=1))
            requirements.append(Requirement(_check_key(key, text), "=", (_check_value(value, text),)))
        elif part.startswith("!"):
            requirements.append(Requirement(_check_key(part[1:].strip(), text), "!"))
        elif re.search(r"\s|[()<>]", part):
            raise bad_request(
                f"unable to parse requirement: found '{part}', expected: ',', '=', '!=' or 'in'"
            )
        else:
            requirements.append(Requirement(_check_key(part, text), "exists"))
    return requirements


def selector_from_match_labels(selector: dict[str, Any] | None) -> list[Requirement]:
    """A `LabelSelector` object (matchLabels + matchExpressions) as requirements."""
    if not selector:
        return []
    reqs = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        reqs.append(Requirement(expr["key"], ops[expr["operator"]], tuple(expr.get("values") or ())))
    return reqs


def selector_to_string(selector: dict[str, Any] | None) -> str:
    """Render a `LabelSelector` object the way `status.selector` of a Scale shows it."""
    parts: list[str] = []
    for req in selector_from_match_labels(selector):
        if req.op == "=":
            parts.append(f"{req.key}={req.values[0]}")
        elif req.op in ("in", "notin"):
            parts.append(f"{req.key} {req.op} ({','.join(req.values)})")
        elif req.op == "exists":
            parts.append(req.key)
        else:
            parts.append(f"!{req.key}")
    return ",".join(parts)


def labels_match(requirements: list[Requirement], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    return all(req.matches(labels) for req in requirements)


def _path(*keys: str) -> Callable[[dict[str, Any]], str]:
    def get(obj: dict[str, Any]) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


_COMMON_FIELDS = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}
FIELD_GETTERS: dict[str, dict[str, Callable[[dict[str, Any]], str]]] = {
    "pods": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "events": {
        **{
            f"involvedObject.{f}": _path("involvedObject", f)
            for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        },
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "secrets": {"type": _path("type")},
    "nodes": {"spec.unschedulable": _path("spec", "unschedulable")},
    "namespaces": {"status.phase": _path("status", "phase")},
    "replicasets": {"status.replicas": _path("status", "replicas")},
}


@dataclass(frozen=True)
class FieldRequirement:
    getter: Callable[[dict[str, Any]], str]
    negate: bool
    value: str

    def matches(self, obj: dict[str, Any]) -> bool:
        return (self.getter(obj) == self.value) != self.negate


def parse_field_selector(text: str | None, plural: str) -> list[FieldRequirement]:
    """Parse `metadata.name=x,status.phase!=Running`; unsupported field labels are a 400, as upstream."""
    if not text:
        return []
    getters = {**_COMMON_FIELDS, **FIELD_GETTERS.get(plural, {})}
    result: list[FieldRequirement] = []
    for part in _split_top_level(text):
        match = re.match(r"^([^=!]+)(==|!=|=)(.*)$", part)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        key, op, value = match.group(1).strip(), match.group(2), match.group(3).strip()
        if key not in getters:
            raise ApiError(400, "BadRequest", f"field label not supported: {key}")
        result.append(FieldRequirement(getters[key], op == "!=", value))
    return result


def fields_match(requirements: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    return all(req.matches(obj) for req in requirements)
