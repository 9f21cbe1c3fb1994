"""`pods/log`: the lines a pod's container wrote, once or followed until the pod is gone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from sandbox.apiserver.errors import ApiError, bad_request
from sandbox.apiserver.respond import truthy

if TYPE_CHECKING:
    from sandbox.apiserver.objects import Api

# (namespace, pod name, container or None, previous) → log lines; raises ApiError when unavailable.
LogSource = Callable[[str, str, str | None, bool], list[str]]
FOLLOW_INTERVAL = 0.5


def lines_of(api: Api, source: LogSource | None, namespace: str, name: str, q: Any) -> list[str]:
    api.get(api.registry.by_key("", "pods"), namespace, name)
    if source is None:
        raise bad_request(f'pod "{name}" has no logs yet')
    return list(source(namespace, name, q.get("container"), truthy(q.get("previous"))))


def tail(lines: list[str], q: Any) -> list[str]:
    count = q.get("tailLines")
    if count is not None and int(count) >= 0:
        return lines[-int(count) :] if int(count) else []
    return lines


def read(api: Api, source: LogSource | None, namespace: str, name: str, q: Any) -> web.Response:
    return web.Response(
        text=text(tail(lines_of(api, source, namespace, name, q), q)), content_type="text/plain"
    )


async def follow(
    api: Api, source: LogSource | None, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    """`follow=true`: what is there, then new lines as they come, until the pod goes away."""
    q = request.query
    uid = api.get(api.registry.by_key("", "pods"), namespace, name)["metadata"]["uid"]
    seen = lines_of(api, source, namespace, name, q)
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "text/plain", "Transfer-Encoding": "chunked"}
    )
    await response.prepare(request)
    try:
        await response.write(text(tail(seen, q)).encode())
        while True:
            await asyncio.sleep(FOLLOW_INTERVAL)
            pod = api.store.peek("", "pods", namespace, name)
            if pod is None or pod["metadata"]["uid"] != uid:
                break
            try:
                current = lines_of(api, source, namespace, name, q)
            except ApiError:
                break
            fresh = new_lines(seen, current)
            if fresh:
                await response.write(text(fresh).encode())
            seen = current
        await response.write_eof()
    except (ConnectionResetError, RuntimeError):
        pass
    return response


def text(lines: list[str]) -> str:
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def new_lines(seen: list[str], current: list[str]) -> list[str]:
    """Lines of `current` after what `seen` already showed (the log may have dropped old lines)."""
    if not seen:
        return current
    if current[: len(seen)] == seen:
        return current[len(seen) :]
    for overlap in range(min(len(seen), len(current)), 0, -1):
        if current[:overlap] == seen[-overlap:]:
            return current[overlap:]
    return current
