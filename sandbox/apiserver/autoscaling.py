"""Validation of autoscaling/v2 HorizontalPodAutoscalers: the scale target and the bounds, as the real
server checks them (apis/autoscaling/validation)."""

from __future__ import annotations

import json
from typing import Any

from sandbox.apiserver.causes import cause as _cause


def hpa_causes(spec: dict[str, Any]) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    ref = spec.get("scaleTargetRef") or {}
    for key in ("kind", "name"):
        if not ref.get(key):
            causes.append(_cause("FieldValueRequired", f"spec.scaleTargetRef.{key}", "Required value"))
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if not isinstance(high, int) or isinstance(high, bool) or high < 1:
        causes.append(
            _cause(
                "FieldValueInvalid",
                "spec.maxReplicas",
                f"Invalid value: {json.dumps(high)}: must be greater than or equal to 1",
            )
        )
    elif not isinstance(low, int) or isinstance(low, bool) or low < 1 or low > high:
        causes.append(
            _cause(
                "FieldValueInvalid",
                "spec.minReplicas",
                f"Invalid value: {json.dumps(low)}: must be greater than or equal to 1 "
                "and at most maxReplicas",
            )
        )
    return causes
