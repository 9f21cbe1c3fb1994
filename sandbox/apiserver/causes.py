"""A validation failure's cause as the API server words it: the cause's shape, a value printed the
way Go prints it, and a field path (`spec.containers[0].image`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

Cause = dict[str, str]


def field_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))[:200]
    return str(value)


def cause(reason: str, field: str, message: str) -> Cause:
    return {"reason": reason, "message": message, "field": field}
