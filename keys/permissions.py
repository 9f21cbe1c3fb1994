"""Scope checks for key-authenticated API requests. Sessions are governed by roles alone.

Each API view declares ``required_scopes``: ``{"read": ..., "write": ..., "<action>": ...}``. The
action name (a viewset action) wins, then read for safe methods and write for the rest. A view that
declares nothing is closed to keys (and fails the suite's endpoint-scope test).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.permissions import SAFE_METHODS, BasePermission

from keys.records import KeyRecord
from keys.scopes import ANY_SCOPE

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


def required_scope(view: object, method: str) -> str | None:
    declared: dict[str, str] = getattr(view, "required_scopes", {}) or {}
    action = getattr(view, "action", None)
    if action and action in declared:
        return declared[action]
    return declared.get("read" if method.upper() in SAFE_METHODS else "write")


class ScopePermission(BasePermission):
    message = "This key lacks the scope this endpoint needs."

    def has_permission(self, request: Request, view: APIView) -> bool:
        record = request.auth
        if not isinstance(record, KeyRecord):
            return True
        needed = required_scope(view, request.method or "GET")
        if needed is None:
            self.message = "This endpoint is not open to API keys; use a browser session."
            return False
        if needed != ANY_SCOPE and needed not in record.scopes:
            self.message = (
                f"This key lacks the `{needed}` scope. Its owner can add it (within their role) "
                "on the Keys page "
                f"or with PATCH /api/v1/keys/{record.key_id}/."
            )
            return False
        return True
