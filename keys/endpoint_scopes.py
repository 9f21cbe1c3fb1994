"""The scope every REST endpoint needs, read off the URL conf (used by the docs table and its test)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

from keys.permissions import required_scope
from keys.scopes import ANY_SCOPE

# Served to any signed-in caller, session or management key, whatever its scopes.
OPEN_TO_ANY_KEY = {"schema", "docs"}
METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class EndpointScope:
    path: str
    method: str
    view: str
    scope: str | None  # None: not open to keys at all (a gap)


def _walk(patterns: list[URLPattern | URLResolver], prefix: str) -> list[tuple[str, URLPattern]]:
    found: list[tuple[str, URLPattern]] = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found.extend(_walk(list(pattern.url_patterns), route))
        else:
            found.append((route, pattern))
    return found


def _api_resolver() -> URLResolver:
    for pattern in get_resolver().url_patterns:
        if isinstance(pattern, URLResolver) and pattern.namespace == "api":
            return pattern
    raise LookupError("no api namespace in the URL conf")


def _readable(route: str) -> str:
    """`^keys/(?P<pk>[^/.]+)/$` and `<int:pk>` both read `{pk}`."""
    route = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", route)
    route = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
    return route.replace("^", "").replace("$", "")


def endpoint_scopes() -> list[EndpointScope]:
    api = _api_resolver()
    rows: dict[tuple[str, str], EndpointScope] = {}
    for route, pattern in _walk(list(api.url_patterns), "/api/v1/"):
        if "format" in route or route.endswith("/api/v1/"):
            continue  # DRF's format-suffix twins and the router's root listing
        callback: Any = pattern.callback
        cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
        if cls is None:
            continue
        path = _readable(route)
        if pattern.name in OPEN_TO_ANY_KEY:
            rows[(path, "get")] = EndpointScope(path, "GET", cls.__name__, ANY_SCOPE)
            continue
        actions: dict[str, str] | None = getattr(callback, "actions", None)
        methods = actions or {m: m for m in METHODS if hasattr(cls, m)}
        for method, action_name in methods.items():
            if method not in METHODS:
                continue
            view = cls()
            view.action = action_name if actions else None
            rows[(path, method)] = EndpointScope(
                path, method.upper(), cls.__name__, required_scope(view, method)
            )
    return sorted(rows.values(), key=lambda r: (r.path, METHODS.index(r.method.lower())))


def markdown_table() -> str:
    lines = ["| Endpoint | Method | Scope |", "|---|---|---|"]
    for row in endpoint_scopes():
        scope = "any management key" if row.scope == ANY_SCOPE else f"`{row.scope}`" if row.scope else "—"
        lines.append(f"| `{row.path}` | {row.method} | {scope} |")
    return "\n".join(lines)
