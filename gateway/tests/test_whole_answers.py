"""A non-streamed answer is read to its end however the network cuts it, and never past the cap."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from gateway.bodies import read_whole
from gateway.errors import GatewayError

PIECE = 50_000


async def _answer_in_pieces(request: web.Request) -> web.StreamResponse:
    count = int(request.query["pieces"])
    response = web.StreamResponse(
        headers={"content-type": "application/json", "content-length": str(PIECE * count)}
    )
    await response.prepare(request)
    for index in range(count):
        await response.write(bytes([48 + index]) * PIECE)
        await asyncio.sleep(0.02)  # each piece reaches the reader on its own
    return response


async def _read(pieces: int, limit: int) -> bytes:
    app = web.Application()
    app.router.add_get("/", _answer_in_pieces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        url = f"http://127.0.0.1:{port}/"
        query = {"pieces": pieces}
        async with aiohttp.ClientSession() as session, session.get(url, params=query) as response:
            return await read_whole(response, limit=limit)
    finally:
        await runner.cleanup()


def test_an_answer_written_in_pieces_is_read_whole():
    body = asyncio.run(_read(pieces=4, limit=1 << 20))
    assert body == b"".join(bytes([48 + i]) * PIECE for i in range(4))


def test_an_answer_over_the_cap_is_refused_not_cut_short():
    with pytest.raises(GatewayError) as refused:
        asyncio.run(_read(pieces=4, limit=3 * PIECE))
    assert (refused.value.status, refused.value.code) == (502, "upstream_answer_too_large")
