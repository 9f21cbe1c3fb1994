"""What a gateway request brought: its key, the caller's address and its body, read and checked before
anything else is done with it (every failure a GatewayError naming the fix)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from controlplane.client_ip import resolve_client_ip
from gateway.errors import GatewayError
from keys import tokens

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]


def header_value(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def token(scope: Scope) -> str:
    """The key from `Authorization: Bearer` (OpenAI clients, Claude Code) or `x-api-key` (Anthropic SDK)."""
    header = header_value(scope, b"authorization")
    if header is None:
        api_key = header_value(scope, b"x-api-key")
        if api_key is not None:
            return api_key
        raise GatewayError(
            401, "missing_api_key", "No API key: send `Authorization: Bearer tdm_i_...` (or `x-api-key`)."
        )
    scheme, _, rest = header.partition(" ")
    if header.strip().startswith(tokens.PREFIX):
        raise GatewayError(
            401,
            "bearer_missing",
            "The Authorization header lacks the word Bearer: `Authorization: Bearer tdm_i_...`.",
        )
    if scheme.lower() != "bearer" or not rest:
        raise GatewayError(401, "invalid_authorization", "Send the key as `Authorization: Bearer tdm_i_...`.")
    return rest


_addresses: dict[tuple[str | None, str | None], str | None] = {}


def source_ip(scope: Scope) -> str | None:
    """resolve_client_ip, remembered per (peer, X-Forwarded-For): settings do not change while serving."""
    client = scope.get("client") or (None, None)
    seen = (client[0], header_value(scope, b"x-forwarded-for"))
    if seen in _addresses:
        return _addresses[seen]
    if len(_addresses) >= 10_000:
        _addresses.clear()
    found = _addresses[seen] = resolve_client_ip(seen[0], seen[1], list(settings.TRUSTED_PROXIES))
    return found


async def read_upto(receive: Receive, limit: int, too_large: Callable[[], Exception]) -> bytes:
    """The request's whole body; ``too_large()`` is raised once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_large()
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def read_body(receive: Receive) -> bytes:
    limit = settings.GATEWAY_MAX_BODY_BYTES
    return await read_upto(
        receive,
        limit,
        lambda: GatewayError(413, "request_too_large", f"The request body is over {limit // 1048576} MiB."),
    )


def parse(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        raise GatewayError(400, "invalid_json", "The body is not valid JSON.") from None
    if not isinstance(parsed, dict):
        raise GatewayError(
            400, "invalid_request", "The body must be a JSON object with `model` and the request."
        )
    model = parsed.get("model")
    if not isinstance(model, str) or not model:
        raise GatewayError(
            400, "missing_model", "Say which model to use: `model` is required.", param="model"
        )
    return parsed


def try_parse(body: bytes) -> tuple[dict[str, Any] | None, GatewayError | None]:
    try:
        return parse(body), None
    except GatewayError as error:
        return None, error
