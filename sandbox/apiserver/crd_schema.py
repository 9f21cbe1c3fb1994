"""Custom resources against their CRD's structural `openAPIV3Schema`, as the API server decodes them:
nulls dropped, unknown fields pruned (or refused with `fieldValidation=Strict`), defaults applied, and
the schema's violations worded as the server words them."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

import jsonschema

from sandbox.apiserver.causes import Cause, cause, field_path, go_value
from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.resources import ResourceType


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


def schema_causes(obj: dict[str, Any], schema: dict[str, Any]) -> list[Cause]:
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
                    cause("FieldValueRequired", field_path([*error.absolute_path, prop]), "Required value")
                )
            continue
        shown = go_value(error.instance)
        if error.validator == "type":
            message = (
                f"Invalid value: {shown}: {path} in body must be of type {error.validator_value}: {shown}"
            )
            causes.append(cause("FieldValueTypeInvalid", path, message))
        elif error.validator == "enum":
            supported = ", ".join(go_value(v) for v in error.validator_value)
            causes.append(
                cause(
                    "FieldValueNotSupported",
                    path,
                    f"Unsupported value: {shown}: supported values: {supported}",
                )
            )
        elif error.validator == "maxLength":
            causes.append(
                cause(
                    "FieldValueTooLong", path, f"Too long: may not be more than {error.validator_value} bytes"
                )
            )
        elif error.validator == "maxItems":
            causes.append(
                cause(
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
            causes.append(cause("FieldValueInvalid", path, f"Invalid value: {shown}: {detail}"))
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
