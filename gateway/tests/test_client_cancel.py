"""A stream the client cuts off is charged the tokens already sent and recorded as cancelled by the
client (499 `client_cancelled`), on chat completions, Messages and Responses alike."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

from gateway.tests.conftest import MODEL

BODIES = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "Count"}], "max_tokens": 3000},
    "/v1/messages": {"messages": [{"role": "user", "content": "Count"}], "max_tokens": 3000},
    "/v1/responses": {"input": "Count", "max_output_tokens": 3000},
}


def cut_after_a_few_events(base: str, path: str, secret: str, body: dict) -> bytes:
    """A raw HTTP/1.1 streaming request read until three events came, then the socket closed."""
    import json

    where = urlsplit(base)
    payload = json.dumps({"model": MODEL, "stream": True, **body}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {where.netloc}\r\nAuthorization: Bearer {secret}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    ).encode()
    seen = b""
    with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
        sock.sendall(head + payload)
        while seen.count(b"data:") < 3:
            piece = sock.recv(4096)
            assert piece, seen
            seen += piece
    return seen


@pytest.mark.parametrize("path", list(BODIES))
def test_a_cut_stream_is_charged_what_was_sent_and_recorded_as_cancelled(gateway, inference_key, path):
    from gateway.models import GatewayRequest

    limit = 3200  # holds the cut stream's reservation (its prompt estimate + 3000)
    spender = inference_key(name="spender", limits_given={"tokens_per_day": limit})
    seen = cut_after_a_few_events(gateway.base, path, spender.secret, BODIES[path])
    assert b" 200 " in seen.split(b"\r\n", 1)[0]
    deadline = time.monotonic() + 15
    row = None
    while time.monotonic() < deadline and row is None:
        row = GatewayRequest.objects.filter(key_id=spender.key.pk).first()
        time.sleep(0.2)
    assert row is not None, "the cut stream was not recorded"
    assert (row.status, row.error_code, row.stream) == (499, "client_cancelled", True)
    assert row.prompt_tokens > 0 and 0 < row.completion_tokens < 3000, row.completion_tokens
    import json

    import requests

    from gateway.reserve import prompt_estimate

    # A request reserving exactly the whole limit fits only if the cut stream was charged nothing.
    def follow_up(max_tokens: int) -> dict:
        return {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": max_tokens}

    max_tokens = next(
        m for m in range(limit, 0, -1) if prompt_estimate(len(json.dumps(follow_up(m)))) + m <= limit
    )
    after = requests.post(
        f"{gateway.base}/v1/chat/completions",
        data=json.dumps(follow_up(max_tokens)),
        headers={"Authorization": f"Bearer {spender.secret}", "Content-Type": "application/json"},
        timeout=10,
    )
    assert after.status_code == 429 and after.json()["error"]["code"] == "insufficient_quota", after.text
    assert after.json()["error"]["limit"]["used"] == row.prompt_tokens + row.completion_tokens, after.text
