"""A small HTTP client for the sandbox's fault-control endpoints (shared by the CLI and the test helper)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def call(
    server: str,
    token: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    ca_path: Path | None = None,
    ca_data: bytes | None = None,
    timeout: float = 10.0,
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    request = urllib.request.Request(server.rstrip("/") + path, data=data, method=method, headers=headers)  # noqa: S310
    context = None
    if server.startswith("https://"):
        context = ssl.create_default_context(cafile=str(ca_path) if ca_path else None)
        if ca_data:
            context.load_verify_locations(cadata=ca_data.decode())
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
