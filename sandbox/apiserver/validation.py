"""Validation the way the API server does it: names and labels, the handful of built-in rules clients
run into first, immutable fields on update, and custom resources against their schema (structural
defaulting, pruning and `openAPIV3Schema` checks in `crd_schema`).

CEL rules (`x-kubernetes-validations`) are evaluated by `sandbox.apiserver.cel`: plain rules on
create and update, transition rules (`oldSelf`) on update.
"""

from __future__ import annotations

import re
from typing import Any

from sandbox.apiserver import rbac_validation
from sandbox.apiserver.autoscaling import hpa_causes
from sandbox.apiserver.causes import Cause, cause, go_value
from sandbox.apiserver.cel import cel_causes
from sandbox.apiserver.crd_schema import schema_causes
from sandbox.apiserver.errors import invalid
from sandbox.apiserver.resources import ResourceType
from sandbox.apiserver.selectors import labels_match, selector_from_match_labels

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_HELP = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_LABEL_HELP = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_HELP = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_VALUE_HELP = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


# -- metadata and built-in kinds -----------------------------------------------------------------
def _name_causes(rt: ResourceType, meta: dict[str, Any]) -> list[Cause]:
    name = meta.get("name")
    if not name:
        return [
            cause("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")
        ]
    if rt.plural == "services" and not _DNS1035_LABEL.match(name):
        return [
            cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": {DNS1035_HELP}',
            )
        ]
    if rt.plural == "namespaces" and not _DNS1123_LABEL.match(name):
        return [
            cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": {DNS1123_LABEL_HELP}',
            )
        ]
    if rt.group == "rbac.authorization.k8s.io":  # RBAC names are path segments (`system:basic-user`)
        bad = next((part for part in ("/", "%") if part in name), None)
        if bad is not None or name in (".", ".."):
            why = f"may not contain '{bad}'" if bad else f"may not be '{name}'"
            return [cause("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {why}')]
    elif not _DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        return [
            cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": {DNS1123_SUBDOMAIN_HELP}',
            )
        ]
    causes = []
    for key, value in (meta.get("labels") or {}).items():
        if (
            not isinstance(value, str)
            or len(value) > 63
            or not re.match(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$", value)
        ):
            causes.append(
                cause(
                    "FieldValueInvalid",
                    "metadata.labels",
                    f"Invalid value: {go_value(value)}: {LABEL_VALUE_HELP} (label {key})",
                )
            )
    return causes


def _containers_causes(spec: dict[str, Any], prefix: str) -> list[Cause]:
    containers = spec.get("containers")
    if not containers:
        return [cause("FieldValueRequired", f"{prefix}.containers", "Required value")]
    causes = []
    for index, container in enumerate(containers):
        for key in ("name", "image"):
            if not container.get(key):
                causes.append(
                    cause("FieldValueRequired", f"{prefix}.containers[{index}].{key}", "Required value")
                )
    return causes


def _builtin_causes(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    if rt.group == "rbac.authorization.k8s.io":
        return rbac_validation.causes(rt.plural, obj)
    spec = obj.get("spec") or {}
    if rt.plural == "pods":
        return _containers_causes(spec, "spec")
    if rt.plural in ("deployments", "replicasets"):
        causes: list[Cause] = []
        replicas = spec.get("replicas", 1)
        if not isinstance(replicas, int) or replicas < 0:
            causes.append(
                cause(
                    "FieldValueInvalid",
                    "spec.replicas",
                    f"Invalid value: {go_value(replicas)}: must be greater than or equal to 0",
                )
            )
        selector = spec.get("selector")
        if not selector:
            causes.append(cause("FieldValueRequired", "spec.selector", "Required value"))
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if selector and not labels_match(selector_from_match_labels(selector), labels):
            causes.append(
                cause(
                    "FieldValueInvalid",
                    "spec.template.metadata.labels",
                    f"Invalid value: {go_value(labels)}: `selector` does not match template `labels`",
                )
            )
        causes += _containers_causes(template.get("spec") or {}, "spec.template.spec")
        return causes
    if rt.plural == "horizontalpodautoscalers":
        return hpa_causes(spec)
    headless = spec.get("clusterIP") == "None" or spec.get("type") == "ExternalName"
    if rt.plural == "services" and not spec.get("ports") and not headless:
        return [cause("FieldValueRequired", "spec.ports", "Required value")]
    return []


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Raise a 422 `Invalid` naming every bad field path, as the real server does."""
    meta = obj.get("metadata") or {}
    causes = _name_causes(rt, meta)
    if rt.custom and rt.schema is not None:
        causes += schema_causes(obj, rt.schema)
        if not causes:
            causes += cel_causes(rt.schema, obj)
    elif not rt.custom:
        causes += _builtin_causes(rt, obj)
    if causes:
        raise invalid(rt.kind, rt.group, meta.get("name") or meta.get("generateName") or "", causes)


_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


def _pod_spec_without_mutable(spec: dict[str, Any], node_name: str | None) -> dict[str, Any]:
    result = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    for key in ("containers", "initContainers"):
        result[key] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get(key) or []]
    if node_name is None:
        result.pop("nodeName", None)  # binding an unscheduled pod is allowed once
    return result


def validate_update(rt: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Immutability rules clients run into: pod specs, workload selectors, a Service's cluster IP."""
    causes: list[Cause] = []
    if rt.group == "rbac.authorization.k8s.io":
        causes += rbac_validation.update_causes(rt.plural, old, new)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if rt.plural == "pods":
        bound = old_spec.get("nodeName")
        if _pod_spec_without_mutable(old_spec, bound) != _pod_spec_without_mutable(new_spec, bound):
            causes.append(
                cause(
                    "FieldValueForbidden",
                    "spec",
                    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
                    "(only additions to existing tolerations), `spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)",
                )
            )
    elif rt.plural in ("deployments", "replicasets") and old_spec.get("selector") != new_spec.get("selector"):
        causes.append(
            cause(
                "FieldValueInvalid",
                "spec.selector",
                f"Invalid value: {go_value(new_spec.get('selector'))}: field is immutable",
            )
        )
    elif (
        rt.plural == "services"
        and old_spec.get("clusterIP")
        and new_spec.get("clusterIP") not in (None, "", old_spec["clusterIP"])
    ):
        causes.append(
            cause(
                "FieldValueInvalid",
                "spec.clusterIPs[0]",
                f"Invalid value: {go_value(new_spec.get('clusterIP'))}: may not change once set",
            )
        )
    if rt.custom and rt.schema is not None:
        causes += cel_causes(rt.schema, new, old)
    if causes:
        raise invalid(rt.kind, rt.group, (new.get("metadata") or {}).get("name", ""), causes)
