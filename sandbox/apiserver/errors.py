"""`Status` error bodies shaped exactly like a real kube-apiserver's."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API failure carried up to the HTTP layer as a `Status` object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details.update(extra)
    return details


def qualified(plural: str, group: str) -> str:
    """`pods` for the core group, `deployments.apps` elsewhere (how the server names a resource)."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(plural, group)} "{name}" not found',
        details=_details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        details=_details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        details=_details(name, group, plural),
    )


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid: `Kind.group "name" is invalid: field: message, field: message`."""
    qualified_kind = f"{kind}.{group}" if group else kind
    summary = ", ".join(f"{cause['field']}: {cause['message']}" for cause in causes)
    if len(causes) > 1:
        summary = "[" + summary + "]"
    return ApiError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {summary}',
        details=_details(name, group, kind, causes=causes),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message, details={})


PATCH_TYPES = (
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
    "application/strategic-merge-patch+json"
)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {PATCH_TYPES} "
        f"(got {content_type})",
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def field_conflicts(conflicts: list[tuple[str, str, str]]) -> ApiError:
    """SSA 409: `conflicts` holds (manager, apiVersion, field path) triples."""
    count = len(conflicts)
    noun = "conflict" if count == 1 else "conflicts"
    if count == 1:
        manager, api_version, field = conflicts[0]
        message = f'Apply failed with 1 conflict: conflict with "{manager}" using {api_version}: {field}'
    else:
        lines = "\n".join(f'- conflict with "{m}" using {v}: {f}' for m, v, f in conflicts)
        message = f"Apply failed with {count} {noun}:\n{lines}"
    causes = [
        {"reason": "FieldManagerConflict", "message": f'conflict with "{m}" using {v}', "field": f}
        for m, v, f in conflicts
    ]
    return ApiError(409, "Conflict", message, details={"causes": causes})
