"""Small pure helpers on object dicts shared by the API server's modules."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sandbox.apiserver.errors import bad_request


def now_iso(offset_seconds: float = 0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(obj)
    meta = result.get("metadata", {})
    meta.pop("resourceVersion", None)
    for entry in meta.get("managedFields") or []:
        entry.pop("time", None)
    return result


def get_by_path(obj: dict[str, Any], path: str) -> Any:
    node: Any = obj
    for key in path.strip(".").split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def set_by_path(obj: dict[str, Any], path: str, value: Any) -> None:
    keys = path.strip(".").split(".")
    node = obj
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def decode_json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError as exc:
        raise bad_request(f"error decoding JSON: {exc}") from exc


def qos_class(pod: dict[str, Any]) -> str:
    containers = pod.get("spec", {}).get("containers") or []
    if not any(
        (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits")
        for c in containers
    ):
        return "BestEffort"
    for c in containers:
        res = c.get("resources") or {}
        limits = res.get("limits") or {}
        requests = res.get("requests") or limits
        if (
            not limits
            or set(limits) < {"cpu", "memory"}
            or any(requests.get(k) != v for k, v in limits.items())
        ):
            return "Burstable"
    return "Guaranteed"
