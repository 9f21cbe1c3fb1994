"""The topology editor: one form field per spec path, with help that explains it.

The form does no validation of its own beyond turning text into a spec dict: ``TopologySpec``
validates, and its field paths (``roles.prefill.accelerator_count``) are the form's field names,
so the editor and the API report the same errors on the same fields.
"""

from __future__ import annotations

import contextlib
import shlex
from typing import Any

import yaml

from topologies.editor_fields import SECTIONS, EditorField
from topologies.spec import TopologySpec

__all__ = ["FIELDS", "SECTIONS", "EditorField", "parse_values", "spec_to_values", "values_to_spec"]


FIELDS: dict[str, EditorField] = {f.path: f for _, _, fields in SECTIONS for f in fields}


def _get(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def spec_to_values(spec: dict[str, Any]) -> dict[str, str]:
    """Text for each editor field from a spec dict (a preset, or a saved topology's spec).

    A valid spec is shown with its defaults filled in, so every field shows what will be used.
    """
    from topologies.spec import SpecError

    with contextlib.suppress(SpecError):
        spec = TopologySpec.from_dict(spec).to_dict()
    values: dict[str, str] = {}
    for path, f in FIELDS.items():
        value = _get(spec, path)
        if value is None:
            values[path] = ""
        elif isinstance(value, bool):
            values[path] = "true" if value else "false"
        elif f.kind == "args":
            values[path] = " ".join(shlex.quote(str(a)) for a in value)
        elif f.kind == "map":
            values[path] = "\n".join(f"{k}={v}" for k, v in dict(value).items())
        elif f.kind == "shape":
            values[path] = ", ".join(str(v) for v in value)
        elif f.kind == "yaml":
            values[path] = yaml.safe_dump(value, sort_keys=False, width=4096) if value else ""
        else:
            values[path] = str(value)
    return values


def values_to_spec(values: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A spec dict from posted text, and the errors found while reading text (e.g. unbalanced quotes).

    Empty fields are left out so the spec's defaults apply.
    """
    spec: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for path, f in FIELDS.items():
        raw = str(values.get(path, "") or "").strip()
        if f.show_for and str(values.get("connector.type", "")) not in f.show_for:
            continue
        if not raw:
            if f.nullable:  # not set: asked for, never a default filled in behind the operator's back
                _set(spec, path, None)
            continue
        if f.kind == "yaml":
            try:
                loaded = yaml.safe_load(raw)
            except yaml.YAMLError as error:
                mark = getattr(error, "problem_mark", None)
                where = f" at line {mark.line + 1}" if mark is not None else ""
                errors[path] = [f"is not valid YAML{where}; fix the indentation or quoting"]
                continue
            if not isinstance(loaded, dict):
                errors[path] = ["must be YAML with metadata, spec and/or engine (a mapping)"]
                continue
            _set(spec, path, loaded)
        elif f.kind == "args":
            try:
                _set(spec, path, shlex.split(raw))
            except ValueError as error:
                errors[path] = [f"cannot split into arguments ({error}); balance the quotes"]
        elif f.kind == "map":
            mapping: dict[str, str] = {}
            for line in raw.splitlines():
                line = line.strip()
                if not line:
                    continue
                if "=" not in line:
                    errors.setdefault(path, []).append(f"{line!r} has no '='; write one NAME=value per line")
                    continue
                key, _, val = line.partition("=")
                mapping[key.strip()] = val.strip()
            _set(spec, path, mapping)
        else:
            _set(spec, path, raw)
    return spec, errors


def parse_values(values: Any) -> tuple[TopologySpec | None, dict[str, Any], dict[str, list[str]]]:
    """(spec or None, raw spec dict, errors by field path) — the editor's whole validation."""
    from topologies.spec import SpecError

    raw, errors = values_to_spec(values)
    try:
        spec = TopologySpec.from_dict(raw)
    except SpecError as error:
        for path, messages in error.errors.items():
            errors.setdefault(path, []).extend(messages)
        return None, raw, errors
    if errors:
        return None, raw, errors
    return spec, raw, errors
