"""Validation of RBAC objects as the API server's `rbac/validation` does it: rules with verbs, API
groups and resources (or non-resource URLs, cluster roles only), role references and subjects."""

from __future__ import annotations

import json
from typing import Any

from sandbox.apiserver.causes import Cause
from sandbox.apiserver.causes import cause as _cause

GROUP = "rbac.authorization.k8s.io"
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _unsupported(field: str, value: Any, values: tuple[str, ...]) -> Cause:
    supported = ", ".join(json.dumps(v) for v in values)
    return _cause(
        "FieldValueNotSupported",
        field,
        f"Unsupported value: {json.dumps(value or '')}: supported values: {supported}",
    )


def rule_causes(rules: Any, *, namespaced: bool, field: str = "rules") -> list[Cause]:
    if rules is None:
        return []
    if not isinstance(rules, list):
        return [
            _cause("FieldValueInvalid", field, f"Invalid value: {json.dumps(rules)[:80]}: must be a list")
        ]
    causes: list[Cause] = []
    for i, rule in enumerate(rules):
        path = f"{field}[{i}]"
        if not isinstance(rule, dict):
            causes.append(_cause("FieldValueInvalid", path, "Invalid value: must be an object"))
            continue
        typed = [
            _cause("FieldValueInvalid", f"{path}.{key}", "Invalid value: must be a list of strings")
            for key in ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
            if rule.get(key) is not None and not _strings(rule[key])
        ]
        if typed:
            causes += typed
            continue
        if not rule.get("verbs"):
            causes.append(
                _cause(
                    "FieldValueRequired",
                    f"{path}.verbs",
                    "Required value: verbs must contain at least one value",
                )
            )
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                causes.append(
                    _cause(
                        "FieldValueInvalid",
                        f"{path}.nonResourceURLs",
                        f"Invalid value: []string{{{', '.join(json.dumps(u) for u in urls)}}}: "
                        "namespaced rules cannot apply to non-resource URLs",
                    )
                )
            if rule.get("apiGroups") or rule.get("resources"):
                causes.append(
                    _cause(
                        "FieldValueInvalid",
                        f"{path}.nonResourceURLs",
                        "Invalid value: rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not rule.get("apiGroups"):
            causes.append(
                _cause(
                    "FieldValueRequired",
                    f"{path}.apiGroups",
                    "Required value: resource rules must supply at least one api group",
                )
            )
        if not rule.get("resources"):
            causes.append(
                _cause(
                    "FieldValueRequired",
                    f"{path}.resources",
                    "Required value: resource rules must supply at least one resource",
                )
            )
    return causes


def binding_causes(obj: dict[str, Any], *, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    ref = obj.get("roleRef")
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    if not isinstance(ref, dict):
        return [_cause("FieldValueRequired", "roleRef", "Required value")]
    if ref.get("apiGroup") != GROUP:
        causes.append(_unsupported("roleRef.apiGroup", ref.get("apiGroup"), (GROUP,)))
    if ref.get("kind") not in kinds:
        causes.append(_unsupported("roleRef.kind", ref.get("kind"), kinds))
    if not isinstance(ref.get("name"), str) or not ref.get("name"):
        causes.append(_cause("FieldValueRequired", "roleRef.name", "Required value"))
    subjects = obj.get("subjects")
    if subjects is not None and not isinstance(subjects, list):
        return [*causes, _cause("FieldValueInvalid", "subjects", "Invalid value: must be a list")]
    for i, subject in enumerate(subjects or []):
        path = f"subjects[{i}]"
        if not isinstance(subject, dict):
            causes.append(_cause("FieldValueInvalid", path, "Invalid value: must be an object"))
            continue
        if not isinstance(subject.get("name"), str) or not subject.get("name"):
            causes.append(_cause("FieldValueRequired", f"{path}.name", "Required value"))
        kind = subject.get("kind")
        if kind not in SUBJECT_KINDS:
            causes.append(_unsupported(f"{path}.kind", kind, SUBJECT_KINDS))
        elif kind == "ServiceAccount" and not namespaced and not subject.get("namespace"):
            causes.append(_cause("FieldValueRequired", f"{path}.namespace", "Required value"))
    return causes


def causes(plural: str, obj: dict[str, Any]) -> list[Cause]:
    """Field errors of a Role, ClusterRole, RoleBinding or ClusterRoleBinding."""
    if plural in ("roles", "clusterroles"):
        return rule_causes(obj.get("rules"), namespaced=plural == "roles")
    if plural in ("rolebindings", "clusterrolebindings"):
        return binding_causes(obj, namespaced=plural == "rolebindings")
    return []


def update_causes(plural: str, old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    if plural in ("rolebindings", "clusterrolebindings") and old.get("roleRef") != new.get("roleRef"):
        shown = json.dumps(new.get("roleRef"), separators=(",", ":"))[:200]
        return [_cause("FieldValueInvalid", "roleRef", f"Invalid value: {shown}: cannot change roleRef")]
    return []
