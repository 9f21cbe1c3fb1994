"""Validation the way the API server does it: structural defaulting, pruning and `openAPIV3Schema`
checks for custom resources, and the handful of built-in rules clients run into first.

CEL rules (`x-kubernetes-validations`) are evaluated by `sandbox.apiserver.cel`: plain rules on
create and update, transition rules (`oldSelf`) on update.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import jsonschema

from sandbox.apiserver import rbac_validation
from sandbox.apiserver.autoscaling import hpa_causes
from sandbox.apiserver.cel import cel_causes
from sandbox.apiserver.errors import ApiError, invalid
from sandbox.apiserver.resources import ResourceType
from sandbox.apiserver.selectors import labels_match, selector_from_match_labels

Cause = dict[str, str]
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


def field_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))[:200]
    return str(value)


def _cause(reason: str, field: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}


# -- structural schema handling -------------------------------------------------------------------
def _drop_nulls(value: Any, schema: dict[str, Any] | None) -> Any:
    if isinstance(value, dict):
        props = (schema or {}).get("properties") or {}
        extra = (schema or {}).get("additionalProperties")
        result = {}
        for key, child in value.items():
            child_schema = props.get(key) or (extra if isinstance(extra, dict) else None)
            if child is None and not (child_schema or {}).get("nullable"):
                continue
            result[key] = _drop_nulls(child, child_schema)
        return result
    if isinstance(value, list):
        return [_drop_nulls(v, (schema or {}).get("items")) for v in value]
    return value


def prune(value: Any, schema: dict[str, Any] | None, *, root: bool = False) -> Any:
    """Drop fields the schema does not declare (unless it preserves unknown fields)."""
    if schema is None:
        return value
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return value
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        embedded = root or schema.get("x-kubernetes-embedded-resource")
        result: dict[str, Any] = {}
        for key, child in value.items():
            if embedded and key in ("apiVersion", "kind", "metadata"):
                result[key] = child
            elif props is not None and key in props:
                result[key] = prune(child, props[key])
            elif isinstance(extra, dict):
                result[key] = prune(child, extra)
            elif props is None and extra is None:
                result[key] = child
        return result
    if isinstance(value, list):
        return [prune(v, schema.get("items")) for v in value]
    return value


def unknown_fields(
    value: Any, schema: dict[str, Any] | None, path: str = "", *, root: bool = False
) -> list[str]:
    """Field paths the schema does not declare (what `fieldValidation=Strict` refuses)."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        embedded = root or schema.get("x-kubernetes-embedded-resource")
        for key, child in value.items():
            child_path = f"{path}.{key}" if path else key
            if embedded and key in ("apiVersion", "kind", "metadata"):
                continue
            if props is not None and key in props:
                found += unknown_fields(child, props[key], child_path)
            elif isinstance(extra, dict):
                found += unknown_fields(child, extra, child_path)
            elif props is not None or extra is not None:
                found.append(child_path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += unknown_fields(item, schema.get("items"), f"{path}[{index}]")
    return found


def apply_defaults(value: Any, schema: dict[str, Any] | None) -> Any:
    if schema is None:
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, child_schema in props.items():
            if key not in value and "default" in child_schema:
                value[key] = copy.deepcopy(child_schema["default"])
            if key in value:
                value[key] = apply_defaults(value[key], child_schema)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                if key not in props:
                    value[key] = apply_defaults(value[key], extra)
    elif isinstance(value, list):
        return [apply_defaults(v, schema.get("items")) for v in value]
    return value


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(json.loads(schema_json))


def _schema_causes(obj: dict[str, Any], schema: dict[str, Any]) -> list[Cause]:
    body_schema = {k: v for k, v in schema.items()}
    props = dict(body_schema.get("properties") or {})
    props.pop("metadata", None)
    body_schema["properties"] = props
    validator = _validator(json.dumps(body_schema, sort_keys=True))
    causes: list[Cause] = []
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        path = field_path(error.absolute_path)
        if error.validator == "required":
            missing = [
                p
                for p in error.validator_value
                if isinstance(error.instance, dict) and p not in error.instance
            ]
            for prop in missing:
                causes.append(
                    _cause("FieldValueRequired", field_path([*error.absolute_path, prop]), "Required value")
                )
            continue
        shown = _go_value(error.instance)
        if error.validator == "type":
            message = (
                f"Invalid value: {shown}: {path} in body must be of type {error.validator_value}: {shown}"
            )
            causes.append(_cause("FieldValueTypeInvalid", path, message))
        elif error.validator == "enum":
            supported = ", ".join(_go_value(v) for v in error.validator_value)
            causes.append(
                _cause(
                    "FieldValueNotSupported",
                    path,
                    f"Unsupported value: {shown}: supported values: {supported}",
                )
            )
        elif error.validator == "maxLength":
            causes.append(
                _cause(
                    "FieldValueTooLong", path, f"Too long: may not be more than {error.validator_value} bytes"
                )
            )
        elif error.validator == "maxItems":
            causes.append(
                _cause(
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(error.instance)}: must have at most {error.validator_value} items",
                )
            )
        else:
            detail = {
                "pattern": f"{path} in body should match '{error.validator_value}'",
                "minimum": f"{path} in body should be greater than or equal to {error.validator_value}",
                "maximum": f"{path} in body should be less than or equal to {error.validator_value}",
                "minLength": f"{path} in body should be at least {error.validator_value} chars long",
                "minItems": f"{path} in body should have at least {error.validator_value} items",
            }.get(str(error.validator), error.message)
            causes.append(_cause("FieldValueInvalid", path, f"Invalid value: {shown}: {detail}"))
    return causes


def prepare_custom(rt: ResourceType, obj: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """Decode a custom resource as the server does: drop nulls, prune unknown fields, default.

    With `strict` (kubectl's default `fieldValidation=Strict`) unknown fields are a 400 instead.
    """
    schema = rt.schema
    if schema is None:
        return obj
    obj = _drop_nulls(obj, schema)
    if strict:
        unknown = unknown_fields(obj, schema, root=True)
        if unknown:
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise ApiError(
                400,
                "BadRequest",
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {listed}",
                details={},
            )
    obj = prune(obj, schema, root=True)
    return apply_defaults(obj, schema)


# -- metadata and built-in kinds -----------------------------------------------------------------
def _name_causes(rt: ResourceType, meta: dict[str, Any]) -> list[Cause]:
    name = meta.get("name")
    if not name:
        return [
            _cause("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")
        ]
    if rt.plural == "services" and not _DNS1035_LABEL.match(name):
        return [
            _cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": {DNS1035_HELP}',
            )
        ]
    if rt.plural == "namespaces" and not _DNS1123_LABEL.match(name):
        return [
            _cause(
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": {DNS1123_LABEL_HELP}',
            )
        ]
    if rt.group == "rbac.authorization.k8s.io":  # RBAC names are path segments (`system:basic-user`)
        bad = next((part for part in ("/", "%") if part in name), None)
        if bad is not None or name in (".", ".."):
            why = f"may not contain '{bad}'" if bad else f"may not be '{name}'"
            return [_cause("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {why}')]
    elif not _DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        return [
            _cause(
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
                _cause(
                    "FieldValueInvalid",
                    "metadata.labels",
                    f"Invalid value: {_go_value(value)}: {LABEL_VALUE_HELP} (label {key})",
                )
            )
    return causes


def _containers_causes(spec: dict[str, Any], prefix: str) -> list[Cause]:
    containers = spec.get("containers")
    if not containers:
        return [_cause("FieldValueRequired", f"{prefix}.containers", "Required value")]
    causes = []
    for index, container in enumerate(containers):
        for key in ("name", "image"):
            if not container.get(key):
                causes.append(
                    _cause("FieldValueRequired", f"{prefix}.containers[{index}].{key}", "Required value")
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
                _cause(
                    "FieldValueInvalid",
                    "spec.replicas",
                    f"Invalid value: {_go_value(replicas)}: must be greater than or equal to 0",
                )
            )
        selector = spec.get("selector")
        if not selector:
            causes.append(_cause("FieldValueRequired", "spec.selector", "Required value"))
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if selector and not labels_match(selector_from_match_labels(selector), labels):
            causes.append(
                _cause(
                    "FieldValueInvalid",
                    "spec.template.metadata.labels",
                    f"Invalid value: {_go_value(labels)}: `selector` does not match template `labels`",
                )
            )
        causes += _containers_causes(template.get("spec") or {}, "spec.template.spec")
        return causes
    if rt.plural == "horizontalpodautoscalers":
        return hpa_causes(spec)
    headless = spec.get("clusterIP") == "None" or spec.get("type") == "ExternalName"
    if rt.plural == "services" and not spec.get("ports") and not headless:
        return [_cause("FieldValueRequired", "spec.ports", "Required value")]
    return []


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Raise a 422 `Invalid` naming every bad field path, as the real server does."""
    meta = obj.get("metadata") or {}
    causes = _name_causes(rt, meta)
    if rt.custom and rt.schema is not None:
        causes += _schema_causes(obj, rt.schema)
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
                _cause(
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
            _cause(
                "FieldValueInvalid",
                "spec.selector",
                f"Invalid value: {_go_value(new_spec.get('selector'))}: field is immutable",
            )
        )
    elif (
        rt.plural == "services"
        and old_spec.get("clusterIP")
        and new_spec.get("clusterIP") not in (None, "", old_spec["clusterIP"])
    ):
        causes.append(
            _cause(
                "FieldValueInvalid",
                "spec.clusterIPs[0]",
                f"Invalid value: {_go_value(new_spec.get('clusterIP'))}: may not change once set",
            )
        )
    if rt.custom and rt.schema is not None:
        causes += cel_causes(rt.schema, new, old)
    if causes:
        raise invalid(rt.kind, rt.group, (new.get("metadata") or {}).get("name", ""), causes)
