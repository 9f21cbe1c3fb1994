"""The gateway's upstream HTTP client, chosen by measuring: aiohttp vs httpx against the echo upstream.

Each client is configured as a gateway would use it (one pooled keep-alive session, no automatic
decompression, the body sent as bytes, the answer read whole or streamed chunk by chunk) and sends
the same chat completion to bench/gateway_peers.py's constant-time upstream, which runs in its own
process, so this process's CPU time is the client's own cost. Turns alternate between the clients.

httpx is not a dependency of Tandem; measure in a scratch virtualenv with the project's aiohttp:

    python3 -m venv var/http-clients-venv
    var/http-clients-venv/bin/pip install httpx sniffio uvloop \
        "aiohttp==$(.venv/bin/python -c 'import aiohttp; print(aiohttp.__version__)')"
    .venv/bin/python bench/gateway_vs_litellm.py --http-clients [--rounds 3]   # runs this file there
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REQUESTS = 2000
CONCURRENCY = 32


def _payload(stream: bool) -> bytes:
    request: dict[str, Any] = {"model": "bench/echo", "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        request.update(stream=True, stream_options={"include_usage": True})
    return json.dumps(request).encode()


async def _aiohttp_client(
    url: str,
) -> tuple[Callable[[bytes, bool], Awaitable[int]], Callable[[], Awaitable[None]]]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=512, keepalive_timeout=60, ttl_dns_cache=30)
    session = aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        skip_auto_headers=("User-Agent",),
        timeout=aiohttp.ClientTimeout(total=None, connect=3.0),
    )
    timeout = aiohttp.ClientTimeout(total=None, connect=3.0, sock_read=60)

    async def send(body: bytes, stream: bool) -> int:
        response = await session.post(
            url, data=body, headers={"Content-Type": "application/json"}, timeout=timeout
        )
        try:
            if not stream:
                return len(await response.content.read(64 * 1024 * 1024))
            size = 0
            async for chunk in response.content.iter_any():
                size += len(chunk)
            return size
        finally:
            response.release()

    return send, session.close


async def _httpx_client(
    url: str,
) -> tuple[Callable[[bytes, bool], Awaitable[int]], Callable[[], Awaitable[None]]]:
    import httpx

    client = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=512, max_keepalive_connections=512, keepalive_expiry=60),
        timeout=httpx.Timeout(connect=3.0, read=60, write=60, pool=60),
        trust_env=False,
    )

    async def send(body: bytes, stream: bool) -> int:
        request = client.build_request(
            "POST", url, content=body, headers={"Content-Type": "application/json"}
        )
        response = await client.send(request, stream=True)
        try:
            size = 0
            async for chunk in response.aiter_raw():
                size += len(chunk)
            return size
        finally:
            await response.aclose()

    return send, client.aclose


async def _turn(
    send: Callable[[bytes, bool], Awaitable[int]], stream: bool, concurrency: int
) -> tuple[float, float]:
    """(wall µs per request, this process's CPU µs per request) over REQUESTS requests."""
    body = _payload(stream)
    for _ in range(50):
        await send(body, stream)
    remaining = REQUESTS

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            if await send(body, stream) <= 0:
                raise RuntimeError("empty answer")

    wall0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return wall / REQUESTS * 1e6, cpu / REQUESTS * 1e6


async def compare_clients(upstream: str, *, rounds: int) -> None:
    import aiohttp

    try:
        import httpx
    except ImportError:
        raise SystemExit(f"httpx is not installed for {sys.executable}; see this file's docstring") from None
    url = f"{upstream}/v1/chat/completions"
    makers = {f"aiohttp {aiohttp.__version__}": _aiohttp_client, f"httpx {httpx.__version__}": _httpx_client}
    clients = {name: await make(url) for name, make in makers.items()}
    figures: dict[tuple[str, bool, int], list[tuple[float, float]]] = {}
    for r in range(rounds):
        names = list(clients) if r % 2 == 0 else list(reversed(clients))
        for stream in (False, True):
            for concurrency in (1, CONCURRENCY):
                for name in names:
                    send, _ = clients[name]
                    figures.setdefault((name, stream, concurrency), []).append(
                        await _turn(send, stream, concurrency)
                    )
    for _, close in clients.values():
        await close()
    print(
        f"upstream HTTP client cost, {REQUESTS} requests per turn, {rounds} turns each, "
        "to a constant-time upstream"
    )
    print("  client          answer         in flight   wall µs/req   client CPU µs/req   (median of turns)")
    for (name, stream, concurrency), samples in figures.items():
        wall = sorted(s[0] for s in samples)[len(samples) // 2]
        cpu = sorted(s[1] for s in samples)[len(samples) // 2]
        kind = "streamed" if stream else "whole"
        print(f"  {name:<15} {kind:<14} {concurrency:9d} {wall:13.1f} {cpu:19.1f}")
    for stream in (False, True):
        cpus = {
            name: sorted(s[1] for s in figures[(name, stream, CONCURRENCY)])[rounds // 2] for name in clients
        }
        best = min(cpus, key=lambda n: cpus[n])
        other = max(cpus, key=lambda n: cpus[n])
        kind = "streamed" if stream else "whole"
        print(
            f"  {kind} answers: {best} costs {cpus[best]:.0f} µs of CPU per request, {other} "
            f"{cpus[other]:.0f} µs ({cpus[other] / cpus[best]:.1f}×)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import uvloop
    from gateway_peers import echo_upstream

    with echo_upstream() as echo:
        uvloop.run(compare_clients(echo.url, rounds=args.rounds))


if __name__ == "__main__":
    main()
