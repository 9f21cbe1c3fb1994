"""The topology spec as a JSON schema, read off the spec parser itself so the two cannot drift.

``spec_json_schema()`` runs ``SpecParser.parse`` with every field reader replaced by one that
records the field's path, type, bounds, choices and default instead of reading a value. Each
field the parser reads therefore appears in the schema with the parser's own limits, and a field
added to the parser appears without anyone editing this module. Cross-field rules (a connector
the engine cannot use, replicas within the rebalancing bounds, ...) stay the parser's: the schema
says what each field may hold, the API's 400 says which combination is refused and why.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from topologies.spec import (
    DNS_LABEL,
    ENV_NAME,
    LABEL_KEY,
    LABEL_VALUE,
    NAME_MAX,
    RESOURCE_NAME,
    TopologySpec,
)
from topologies.spec_parser import SpecParser
from topologies.spec_values import TEXT_MAX

#: Patterns and lengths the parser checks after reading a field (its own constants).
_TEXT_RULES: dict[str, dict[str, Any]] = {
    "name": {"pattern": DNS_LABEL.pattern, "maxLength": NAME_MAX},
    "namespace": {"pattern": DNS_LABEL.pattern, "maxLength": 63},
    "roles.prefill.accelerator_resource": {"pattern": RESOURCE_NAME.pattern},
    "roles.decode.accelerator_resource": {"pattern": RESOURCE_NAME.pattern},
    "connector.master_address": {"pattern": r"^$|^[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$"},
}


class _Probe(dict[str, Any]):
    """A section that is never empty: every key holds another probe."""

    def __bool__(self) -> bool:
        return True

    def get(self, key: str, default: Any = None) -> Any:
        return _Probe()


class _ProbeText(str):
    """The value a recorded text field reads as; a default derived from it is not a real default."""


class _SchemaRecorder(SpecParser):
    def __init__(self) -> None:
        super().__init__(_Probe())
        self.fields: dict[str, dict[str, Any]] = {}
        self.required: set[str] = set()
        self.optional: set[str] = set()

    def err(self, path: str, message: str) -> None:
        """Cross-field checks run on probe values; their findings are not part of the schema."""

    def record(self, path: str, schema: dict[str, Any], *, required: bool = False) -> None:
        self.fields[path] = schema
        if required:
            self.required.add(path)

    def section(self, parent: dict[str, Any], key: str, path: str) -> dict[str, Any]:
        self.record(path, {"type": "object", "nullable": True})
        return _Probe()

    def text(
        self,
        src: dict[str, Any],
        key: str,
        path: str,
        default: str | None = None,
        *,
        limit: int | None = TEXT_MAX,
    ) -> str:
        schema: dict[str, Any] = {"type": "string", "maxLength": limit or TEXT_MAX}
        schema.update(_TEXT_RULES.get(path, {}))
        if default is not None and not isinstance(default, _ProbeText):
            schema["default"] = default
        self.record(path, schema, required=default is None)
        return _ProbeText(default or "probe")

    def choice(
        self, src: dict[str, Any], key: str, path: str, options: tuple[str, ...], default: str = ""
    ) -> str:
        schema: dict[str, Any] = {"type": "string", "enum": list(options)}
        if default:
            schema["default"] = default
        self.record(path, schema, required=not default)
        return default or options[0]

    def integer(
        self, src: dict[str, Any], key: str, path: str, default: int | None = None, *, lo: int, hi: int
    ) -> int:
        schema: dict[str, Any] = {"type": "integer", "minimum": lo, "maximum": hi}
        self.record(path, schema, required=default is None)
        return lo if default is None else default

    def boolean(self, src: dict[str, Any], key: str, path: str, default: bool) -> bool:
        self.record(path, {"type": "boolean", "default": default})
        return default

    def unset_or_integer(
        self, src: dict[str, Any], key: str, path: str, default: int, *, lo: int, hi: int
    ) -> int:
        self.record(
            path,
            {
                "type": "integer",
                "minimum": lo,
                "maximum": hi,
                "nullable": True,
                "description": "null: not set yet (an import leaves what it cannot infer unset)",
            },
        )
        return default

    def overlay(self, src: dict[str, Any], key: str, path: str) -> dict[str, Any]:
        self.record(
            path,
            {
                "type": "object",
                "nullable": True,
                "additionalProperties": True,
                "description": (
                    "What the spec does not model, applied over the rendered pod template: metadata "
                    "(labels, annotations), spec (pod fields: initContainers, sidecar containers, volumes, "
                    "tolerations, affinity, securityContext, ...) and engine (the engine container's "
                    "volumeMounts, probes, securityContext, env entries, ...)."
                ),
            },
        )
        return {}

    def quantity(self, src: dict[str, Any], key: str, path: str, *, what: str, example: str) -> str:
        self.record(
            path,
            {
                "oneOf": [{"type": "string", "maxLength": TEXT_MAX}, {"type": "number", "minimum": 0}],
                "description": f"A Kubernetes quantity for {what}, e.g. {example}; empty: no request",
            },
        )
        return ""

    def str_map(self, src: dict[str, Any], key: str, path: str, *, env: bool) -> dict[str, str]:
        value: dict[str, Any] = {"type": "string", "maxLength": TEXT_MAX}
        if not env:
            value["pattern"] = LABEL_VALUE.pattern
        self.record(
            path,
            {
                "type": "object",
                "nullable": True,
                "additionalProperties": value,
                "x-key-pattern": (ENV_NAME if env else LABEL_KEY).pattern,
            },
        )
        return {}

    def sizes(self, src: dict[str, Any], key: str, path: str) -> list[int]:
        self.record(
            path,
            {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
            required=True,
        )
        return [1]

    def arguments(self, src: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
        self.record(
            path,
            {
                "type": "array",
                "items": {"type": "string", "maxLength": TEXT_MAX},
                "description": "Extra engine arguments; flags Tandem sets from the spec are refused.",
            },
        )
        return ()

    def parse_cache_desc(self, raw: Any) -> Any:
        self.optional.add("connector.cache_desc")
        self.record(
            "connector.cache_desc",
            {"type": "object", "nullable": True, "description": "Required for llm-datadist."},
        )
        return super().parse_cache_desc(raw)


def _tree(fields: dict[str, dict[str, Any]], required: set[str], optional: set[str]) -> dict[str, Any]:
    root: dict[str, Any] = {"type": "object", "properties": {}}
    nodes: dict[str, dict[str, Any]] = {"": root}
    for path in sorted(fields, key=lambda p: p.count(".")):
        parent_path, _, key = path.rpartition(".")
        parent = nodes.get(parent_path)
        if parent is None:  # a field under a section the parser reads without section()
            parent = nodes[parent_path] = {"type": "object", "properties": {}}
        node = copy.deepcopy(fields[path])
        if node.get("type") == "object" and "additionalProperties" not in node:
            node.setdefault("properties", {})
        parent.setdefault("properties", {})[key] = node
        nodes[path] = node
        if path in required:
            parent.setdefault("required", []).append(key)
    # A section holding a required field is itself required (and cannot be null).
    for path in sorted(nodes, key=lambda p: -p.count(".")):
        if not path or not nodes[path].get("required") or path in optional:
            continue
        parent_path, _, key = path.rpartition(".")
        nodes[path].pop("nullable", None)
        siblings = nodes[parent_path].setdefault("required", [])
        if key not in siblings:
            siblings.append(key)
    return root


@functools.cache
def spec_json_schema() -> dict[str, Any]:
    """The request schema of a topology spec (OpenAPI 3.0 flavour of JSON schema)."""
    recorder = _SchemaRecorder()
    recorder.parse()
    schema = _tree(recorder.fields, recorder.required, recorder.optional)
    schema["description"] = (
        "A P/D topology: engine, KV connector, prefill and decode roles, routing, SLOs and "
        "rebalancing bounds. Fields not listed are ignored."
    )
    return schema


@functools.cache
def stored_spec_json_schema() -> dict[str, Any]:
    """The spec as Tandem returns it (``TopologySpec.to_dict``): every field present, defaults filled in."""
    schema = copy.deepcopy(spec_json_schema())

    def close(node: dict[str, Any]) -> None:
        props = node.get("properties")
        if isinstance(props, dict):
            node["required"] = sorted(props)
            for child in props.values():
                close(child)
                if child.get("type") == "object" and child.get("properties") and child is not desc:
                    child.pop("nullable", None)
                child.pop("default", None)

    desc = schema["properties"]["connector"]["properties"]["cache_desc"]
    close(schema)
    desc["nullable"] = True  # null when the connector needs none
    for role_name in ("prefill", "decode"):  # null: not set yet (an import does not invent bounds)
        schema["properties"]["rebalancing"]["properties"][role_name]["nullable"] = True
    roles = schema["properties"]["roles"]["properties"]
    for role in roles.values():
        for name in ("cpu", "memory"):
            role["properties"][name] = {"type": "string"}
    return schema


def spec_fields(spec: TopologySpec) -> set[str]:
    """Dotted paths of every leaf in a parsed spec (for drift checks between parser and schema)."""
    out: set[str] = set()

    def walk(value: Any, prefix: str) -> None:
        if (
            isinstance(value, dict)
            and value
            and prefix.rsplit(".", 1)[-1] not in ("env", "node_selector", "pod_overlay")
        ):
            for key, child in value.items():
                walk(child, f"{prefix}.{key}" if prefix else key)
        else:
            out.add(prefix)

    walk(spec.to_dict(), "")
    return out
