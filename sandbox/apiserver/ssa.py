"""Server-side apply: field ownership in `metadata.managedFields`, conflicts, and the apply merge.

Ownership is tracked per leaf field. Maps are walked key by key; every list is one atomic leaf
(the real server merges some lists by key — here a list belongs to whoever last set it whole).
`metadata.labels` and `metadata.annotations` are tracked; the rest of `metadata` and `status`
are not (status belongs to the status subresource).
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from sandbox.apiserver.errors import field_conflicts

Path = tuple[str, ...]
_UNTRACKED_TOP = {"apiVersion", "kind", "status"}


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _leaves(value: Any, prefix: Path) -> set[Path]:
    if isinstance(value, dict) and value:
        result: set[Path] = set()
        for key, child in value.items():
            result |= _leaves(child, (*prefix, key))
        return result
    return {prefix}


def field_set(obj: dict[str, Any]) -> set[Path]:
    """Leaf paths of an object that ownership is tracked for."""
    result: set[Path] = set()
    for key, value in obj.items():
        if key in _UNTRACKED_TOP:
            continue
        if key == "metadata":
            for sub in ("labels", "annotations"):
                if isinstance(value, dict) and value.get(sub):
                    result |= _leaves(value[sub], ("metadata", sub))
            continue
        result |= _leaves(value, (key,))
    return result


def get_path(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


class _Missing:
    pass


_MISSING = _Missing()


def _delete_path(obj: dict[str, Any], path: Path) -> None:
    parents: list[tuple[dict[str, Any], str]] = []
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents):  # prune maps the removal left empty
        if parent[key] == {}:
            del parent[key]
        else:
            break


def encode_fields(paths: set[Path]) -> dict[str, Any]:
    """`fieldsV1` form: nested `{"f:spec": {"f:replicas": {}}}`."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for key in path:
            node = node.setdefault(f"f:{key}", {})
    return root


def decode_fields(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    result: set[Path] = set()
    for key, child in fields.items():
        if not key.startswith("f:"):
            continue
        path = (*prefix, key[2:])
        result |= decode_fields(child, path) if child else {path}
    return result


def _overlaps(a: Path, b: Path) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def format_path(path: Path) -> str:
    return "".join(f".{key}" for key in path)


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(obj.get("metadata", {}).get("managedFields") or [])


def _set_entry(
    entries: list[dict[str, Any]],
    manager: str,
    operation: str,
    api_version: str,
    paths: set[Path],
    subresource: str,
) -> list[dict[str, Any]]:
    kept = [
        e
        for e in entries
        if not (
            e.get("manager") == manager
            and e.get("operation") == operation
            and e.get("subresource", "") == subresource
        )
    ]
    if paths:
        entry: dict[str, Any] = {
            "manager": manager,
            "operation": operation,
            "apiVersion": api_version,
            "time": now_iso(),
            "fieldsType": "FieldsV1",
            "fieldsV1": encode_fields(paths),
        }
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    return kept


def _without(
    entries: list[dict[str, Any]], taken: set[Path], skip: tuple[str, str] | None = None
) -> list[dict[str, Any]]:
    """Remove `taken` paths (and anything they overlap) from every entry except `skip`."""
    result: list[dict[str, Any]] = []
    for entry in entries:
        if skip is not None and (entry.get("manager"), entry.get("operation")) == skip:
            result.append(entry)
            continue
        owned = decode_fields(entry.get("fieldsV1") or {})
        remaining = {p for p in owned if not any(_overlaps(p, t) for t in taken)}
        if remaining == owned:
            result.append(entry)
        elif remaining:
            result.append({**entry, "fieldsV1": encode_fields(remaining)})
    return result


def record_update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, api_version: str, subresource: str = ""
) -> None:
    """After a create/PUT/PATCH: the updater owns the leaves whose values it set or changed."""
    new_fields = field_set(new) if subresource != "status" else _leaves(new.get("status") or {}, ("status",))
    if old is None:
        changed = new_fields
        entries: list[dict[str, Any]] = []
    else:
        changed = {p for p in new_fields if get_path(old, p) != get_path(new, p)}
        old_fields = field_set(old)
        removed = {p for p in old_fields if get_path(new, p) is _MISSING}
        entries = _without(_entries(new), changed | removed)
    if not changed and old is not None:
        new["metadata"]["managedFields"] = entries
        return
    prior = next(
        (e for e in entries if e.get("manager") == manager and e.get("operation") == "Update"),
        None,
    )
    owned = decode_fields(prior["fieldsV1"]) if prior else set()
    entries = _set_entry(entries, manager, "Update", api_version, owned | changed, subresource)
    new["metadata"]["managedFields"] = entries


def apply(
    live: dict[str, Any] | None, config: dict[str, Any], manager: str, api_version: str, *, force: bool
) -> dict[str, Any]:
    """Merge an applied configuration into the live object; raise 409 on foreign-owned changes."""
    applied = field_set(config)
    if live is None:
        result = copy.deepcopy(config)
        result.setdefault("metadata", {})["managedFields"] = _set_entry(
            [], manager, "Apply", api_version, applied, ""
        )
        return result
    entries = _entries(live)
    conflicts: list[tuple[str, str, str]] = []
    taken: set[Path] = set()
    for entry in entries:
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            continue
        for owned in decode_fields(entry.get("fieldsV1") or {}):
            for path in applied:
                if not _overlaps(owned, path):
                    continue
                if get_path(live, path) != get_path(config, path):
                    conflicts.append(
                        (entry["manager"], entry.get("apiVersion", api_version), format_path(owned))
                    )
                    taken.add(path)
    conflicts = sorted(set(conflicts), key=lambda c: (c[2], c[0]))
    if conflicts and not force:
        raise field_conflicts(conflicts)
    previous = next(
        (e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"), None
    )
    previously_applied = decode_fields(previous["fieldsV1"]) if previous else set()
    others: set[Path] = set()
    for entry in entries:
        if not (entry.get("manager") == manager and entry.get("operation") == "Apply"):
            others |= decode_fields(entry.get("fieldsV1") or {})
    result = copy.deepcopy(live)
    for path in previously_applied - applied:
        if not any(_overlaps(path, o) for o in others) and not any(_overlaps(path, a) for a in applied):
            _delete_path(result, path)
    result = _merge(result, {k: v for k, v in config.items() if k != "status"})
    entries = _without(entries, taken, skip=(manager, "Apply"))
    result["metadata"]["managedFields"] = _set_entry(entries, manager, "Apply", api_version, applied, "")
    return result


def _merge(live: Any, config: Any) -> Any:
    if isinstance(live, dict) and isinstance(config, dict):
        result = dict(live)
        for key, value in config.items():
            result[key] = _merge(live.get(key), value) if key in live else copy.deepcopy(value)
        return result
    return copy.deepcopy(config)


def manager_from_user_agent(user_agent: str | None) -> str:
    """Default field manager for non-apply writes: the user agent up to its first '/'."""
    if not user_agent:
        return "unknown"
    return user_agent.split("/", 1)[0][:128]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
