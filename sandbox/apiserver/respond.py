"""What every API handler shares: a compact JSON response, and a query parameter read as a flag."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web


def json_response(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")
