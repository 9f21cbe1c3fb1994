"""Compare live cluster objects with the desired revision's manifests, on the fields Tandem sets.

Pure: the caller fetches the live objects. Only what the desired object says is compared (its `spec`,
`metadata.labels` and `metadata.annotations`); fields the API server adds (defaults, status,
managedFields, resourceVersion, ...) are noise and ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from kube import quantity


class Difference(TypedDict):
    object: str
    path: str
    live: Any
    desired: Any
    text: str


def object_key(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind', '?')}/{obj.get('metadata', {}).get('name', '?')}"


def _same_scalar(live: Any, desired: Any, path: str = "") -> bool:
    if live == desired:
        return True
    if ".resources." in f".{path}" and quantity.same(live, desired):
        return True  # the API server stores quantities canonically: "1.5" comes back as "1500m"
    if isinstance(live, bool) or isinstance(desired, bool):
        return False
    if isinstance(live, (int, float, str)) and isinstance(desired, (int, float, str)):
        return str(live) == str(desired)
    return False


def _short(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, (dict, list)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return str(value)


def _walk(live: Any, desired: Any, path: str, emit: Callable[[str, Any, Any], None]) -> None:
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            emit(path, live, desired)
            return
        for key, value in desired.items():
            _walk(live.get(key), value, f"{path}.{key}" if path else str(key), emit)
    elif isinstance(desired, list):
        if not isinstance(live, list):
            emit(path, live, desired)
            return
        if len(live) != len(desired):
            emit(f"{path} (length)", len(live), len(desired))
        for index, (live_item, desired_item) in enumerate(zip(live, desired, strict=False)):
            _walk(live_item, desired_item, f"{path}[{index}]", emit)
    elif not _same_scalar(live, desired, path):
        emit(path, live, desired)


def object_differences(live: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> list[Difference]:
    """Differences between one live object and its desired form (empty when in sync)."""
    key = object_key(desired)
    if live is None:
        return [
            {
                "object": key,
                "path": "",
                "live": None,
                "desired": "present",
                "text": f"{key}: missing from the cluster",
            }
        ]
    out: list[Difference] = []

    def emit(path: str, live_value: Any, desired_value: Any) -> None:
        out.append(
            {
                "object": key,
                "path": path,
                "live": live_value,
                "desired": desired_value,
                "text": f"{key}: {path} live {_short(live_value)}, desired {_short(desired_value)}",
            }
        )

    desired_meta = desired.get("metadata", {}) or {}
    live_meta = live.get("metadata", {}) or {}
    for part in ("labels", "annotations"):
        if desired_meta.get(part):
            _walk(live_meta.get(part) or {}, desired_meta[part], f"metadata.{part}", emit)
    for section in ("spec", "data", "stringData"):
        if section in desired:
            _walk(live.get(section), desired[section], section, emit)
    return out


def manifest_differences(
    desired: list[Mapping[str, Any]], live_by_key: Mapping[str, Mapping[str, Any] | None]
) -> list[Difference]:
    """Differences over a whole revision; `live_by_key` maps `Kind/name` to the live object or None."""
    out: list[Difference] = []
    for obj in desired:
        out.extend(object_differences(live_by_key.get(object_key(obj)), obj))
    return out
