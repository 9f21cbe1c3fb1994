"""The pooled keep-alive HTTP client to clusters and fallbacks (one per event loop)."""

from __future__ import annotations

import asyncio

import aiohttp

CONNECT_TIMEOUT = 3.0
POOL_SIZE = 512
_sessions: dict[int, aiohttp.ClientSession] = {}


def session() -> aiohttp.ClientSession:
    loop_id = id(asyncio.get_running_loop())
    found = _sessions.get(loop_id)
    if found is None or found.closed:
        connector = aiohttp.TCPConnector(limit=POOL_SIZE, keepalive_timeout=60, ttl_dns_cache=30)
        found = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # an upstream's cookies are never kept, nor sent back
            auto_decompress=False,
            skip_auto_headers=("User-Agent",),
            timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT),
        )
        _sessions[loop_id] = found
    return found


async def close_session() -> None:
    """Close and drop this loop's session: the loop is ending (a probe run's in a worker). A session
    left behind would hold its connector, and a later loop at the same address would be given it."""
    found = _sessions.pop(id(asyncio.get_running_loop()), None)
    if found is not None:
        await found.close()


class UpstreamFailed(Exception):
    """The upstream could not be used: not reached, timed out, or answered with a server error."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


JSON_HEADERS = {"Content-Type": "application/json"}
_timeouts: dict[float, aiohttp.ClientTimeout] = {}


def _timeout(first_byte: float) -> aiohttp.ClientTimeout:
    found = _timeouts.get(first_byte)
    if found is None:
        found = _timeouts[first_byte] = aiohttp.ClientTimeout(
            total=None, connect=CONNECT_TIMEOUT, sock_read=first_byte
        )
    return found


async def post(
    url: str, body: bytes, *, headers: dict[str, str], first_byte_timeout: float
) -> aiohttp.ClientResponse:
    """Send; return once the response headers arrived. Raises UpstreamFailed when it cannot be had."""
    try:
        return await session().post(
            url,
            data=body,
            headers={**JSON_HEADERS, **headers} if headers else JSON_HEADERS,
            timeout=_timeout(first_byte_timeout),
        )
    except TimeoutError:
        raise UpstreamFailed(f"no answer from {_host(url)} within {first_byte_timeout:g} s") from None
    except aiohttp.ClientConnectorError as error:
        raise UpstreamFailed(f"cannot connect to {_host(url)} ({error.os_error or error})") from None
    except aiohttp.ClientError as error:
        raise UpstreamFailed(f"{_host(url)} failed: {type(error).__name__}") from None


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url
