"""Error bodies in the callers' own formats: OpenAI's, and Anthropic's on /v1/messages (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "api_error",
    504: "api_error",
}
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    502: "api_error",
    503: "overloaded_error",
    504: "api_error",
}


@dataclass
class GatewayError(Exception):
    status: int
    code: str
    message: str
    param: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # On a 429 from a key's limit: which limit, its value, when it resets (keys.limits.limit_details).
    limit: dict[str, object] | None = None
    # Why the backend failed, in words, apart from the advice around it (the probes show it per leg).
    reason: str = ""

    def __str__(self) -> str:
        return self.message


def openai_body(error: GatewayError) -> bytes:
    body: dict[str, object] = {
        "message": error.message,
        "type": OPENAI_TYPES.get(error.status, "api_error"),
        "param": error.param,
        "code": error.code,
    }
    if error.limit:
        body["limit"] = error.limit  # an extra member: the SDKs keep it in the error's body
    return json.dumps({"error": body}).encode()


def anthropic_body(error: GatewayError) -> bytes:
    body: dict[str, object] = {
        "type": ANTHROPIC_TYPES.get(error.status, "api_error"),
        "message": error.message,
    }
    if error.limit:
        body["limit"] = error.limit
    return json.dumps({"type": "error", "error": body}).encode()
