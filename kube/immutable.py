"""Fields the Kubernetes API server refuses to change on an existing object. Pure.

CRD transition rules such as ModelRoute's ``self == oldSelf`` on ``modelName`` and built-in
immutable fields: a change to one is made by deleting the object and creating it again (the deploy
runner does so, and preflight says it will), never by an update the server answers with a 422.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

IMMUTABLE_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "ModelRoute": (("spec", "modelName"),),
    "Deployment": (("spec", "selector"),),
    "StatefulSet": (("spec", "selector"),),
}


def _field(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = obj
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def immutable_changes(live: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> list[str]:
    """Immutable fields whose desired value differs from the live object's, as readable phrases."""
    if live is None:
        return []
    out = []
    for path in IMMUTABLE_FIELDS.get(str(desired.get("kind", "")), ()):
        before, after = _field(live, path), _field(desired, path)
        if before is not None and before != after:
            out.append(f"{'.'.join(path)} {before!r} → {after!r}")
    return out
