"""A whole (non-streamed) answer read from an upstream: to its end, never past the cap."""

from __future__ import annotations

import aiohttp

from gateway.errors import GatewayError

MAX_ANSWER_BYTES = 64 * 1024 * 1024


async def read_whole(response: aiohttp.ClientResponse, *, limit: int = MAX_ANSWER_BYTES) -> bytes:
    """Every byte of the answer's body. An answer arrives in as many pieces as the network cut it into
    (a single ``read(n)`` returns the first of them only); one larger than ``limit`` is refused with a
    502 rather than passed on cut short."""
    pieces: list[bytes] = []
    size = 0
    while True:
        piece = await response.content.readany()
        if not piece:
            return pieces[0] if len(pieces) == 1 else b"".join(pieces)
        size += len(piece)
        if size > limit:
            raise GatewayError(
                502,
                "upstream_answer_too_large",
                f"The upstream's answer is larger than {limit // (1024 * 1024)} MiB; ask for a shorter "
                "answer (max_tokens) or stream it.",
            )
        pieces.append(piece)
