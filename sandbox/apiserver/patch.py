"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and an approximation of strategic merge patch.

Strategic merge patch here: maps merge recursively like a merge patch; lists of objects are
merged by their merge key when both sides carry it (`name`, `containerPort`, `mountPath`,
`type`, `ip`, `devicePath`, `port`); every other list is replaced. The directives kubectl sends
(`$patch: delete|replace`, `$setElementOrder/...`, `$retainKeys`, `$deleteFromPrimitiveList/...`)
are honoured or dropped so they never leak into stored objects. `patched` applies a PATCH request's
body by its content type.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from sandbox.apiserver.errors import ApiError, bad_request, unsupported_media_type
from sandbox.apiserver.resources import ResourceType

MERGE_KEYS = ("name", "containerPort", "mountPath", "type", "ip", "devicePath", "port")


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "json patch must be a list of operations")
    try:
        result = jsonpatch.JsonPatch(operations).apply(copy.deepcopy(target))
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ) as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    if not isinstance(result, dict):
        raise ApiError(422, "Invalid", "json patch result is not an object")
    return result


def _merge_key(items: list[Any]) -> str | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in MERGE_KEYS:
        if all(key in i for i in items):
            return key
    return None


def _merge_list(target: list[Any], patch: list[Any]) -> list[Any]:
    live = [i for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    if len(live) != len(patch):
        return [strategic_merge_patch(None, i) for i in live]
    key = _merge_key([*target, *[i for i in patch if not (isinstance(i, dict) and "$patch" in i)]])
    if key is None:
        return [strategic_merge_patch(None, i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    result = copy.deepcopy(target)
    for item in patch:
        index = next((n for n, cur in enumerate(result) if cur.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge_patch(None, item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if isinstance(patch, list):
        return _merge_list(target if isinstance(target, list) else [], patch)
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: strategic_merge_patch(None, v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
            continue
        merged = strategic_merge_patch(result.get(key), value)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    return result


def patched(rt: ResourceType, old: dict[str, Any], content_type: str, body: Any) -> dict[str, Any]:
    """`old` with a PATCH request's body applied as its content type says (415 for any other type,
    and for a strategic merge patch of a custom resource)."""
    if content_type == "application/json-patch+json":
        new = json_patch(old, body)
    elif content_type == "application/merge-patch+json":
        new = merge_patch(old, body)
    elif content_type == "application/strategic-merge-patch+json":
        if rt.custom:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "strategic merge patch is not supported for custom resources; use --type=merge",
            )
        new = strategic_merge_patch(old, body)
    else:
        raise unsupported_media_type(content_type)
    if not isinstance(new, dict):
        raise bad_request("the patch did not produce an object")
    return new
