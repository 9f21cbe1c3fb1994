"""One error shape for the whole API: {"error": {"code", "message", "fields"}}."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class DomainError(exceptions.APIException):
    """Raised by services for a refused operation; views need not catch it."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        fields: dict[str, list[str]] | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(detail=message, code=code or self.default_code)
        self.message = message
        self.code = code or self.default_code
        self.fields = fields or {}
        if status_code is not None:
            self.status_code = status_code


class Conflict(DomainError):
    status_code: int = status.HTTP_409_CONFLICT
    default_code = "conflict"


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            fields.update(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            fields[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                fields.update(_flatten(item, f"{prefix}[{index}]"))
    else:
        fields[prefix or "non_field_errors"] = [str(detail)]
    return fields


def error_body(
    code: str,
    message: str,
    fields: dict[str, list[str]] | None = None,
    *,
    limit: dict[str, object] | None = None,
) -> dict[str, Any]:
    """The error shape; `limit` only on a 429 (which limit, its value, when it resets, retry after)."""
    error: dict[str, Any] = {"code": code, "message": message, "fields": fields or {}}
    if limit:
        error["limit"] = limit
    return {"error": error}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status_code)
    response: Response | None = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        first = next(iter(fields.items()), ("", ["invalid input"]))
        message = f"{first[0]}: {first[1][0]}" if first[0] and first[0] != "non_field_errors" else first[1][0]
        response.data = error_body("invalid", message, fields)
    else:
        detail = getattr(exc, "detail", str(exc))
        code = getattr(exc, "default_code", "error")
        if hasattr(detail, "code") and detail.code:
            code = detail.code
        response.data = error_body(str(code), str(detail), limit=getattr(exc, "limit", None))
    return response
