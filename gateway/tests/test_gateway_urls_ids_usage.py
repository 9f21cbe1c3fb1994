"""Ids and usage as vLLM 0.32 writes them, through the gateway: `chatcmpl-<id>` (never the prefix
twice), and `usage.prompt_tokens_details.cached_tokens` passed through from the engine (a decode
instance reports the prefill's prefix-cache hits; null unless started with
--enable-prompt-tokens-details, as recorded in telemetry/tests/data/vllm-0.32.0/chat.200.json)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from gateway.services import route_update
from sandbox.engine.testing import PDStack

PROMPT = "Summarise the following design notes. " + "The router sends each request to a prefill pod. " * 40


async def gateway_call(secret: str, body: dict[str, Any]) -> tuple[int, Any]:
    from gateway.app import application

    sent: list[dict[str, Any]] = []
    raw = json.dumps(body).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {secret}".encode()), (b"content-type", b"application/json")]
    scope = {"type": "http", "path": "/v1/chat/completions", "method": "POST", "headers": headers,
             "client": ("127.0.0.1", 1)}  # fmt: skip
    await application(scope, receive, send)
    status = next(m for m in sent if m["type"] == "http.response.start")["status"]
    return status, json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


@pytest.mark.django_db(transaction=True)
def test_ids_are_vllms_and_cached_tokens_pass_through_the_gateway(make_topology, inference_key, admin_user):
    topology = make_topology()
    issued = inference_key(name="cache-reader")

    async def run() -> list[Any]:
        answers = []
        async with PDStack(
            model=topology.model_name, args=(topology.model_name, "--enable-prompt-tokens-details")
        ) as flagged:
            await asyncio.to_thread(
                route_update,
                topology=topology,
                changes={"endpoint_url": flagged.router_url},
                actor=admin_user,
            )
            body = {
                "model": topology.model_name,
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": 4,
            }
            for _ in range(2):  # the second finds the first's prefix in the prefill's cache
                answers.append(await gateway_call(issued.secret, body))
            from gateway.recorder import flush_all

            await flush_all()  # the records are written before this loop ends
            from gateway import upstream

            await upstream._sessions.pop(id(asyncio.get_running_loop())).close()  # this loop's pool
        async with (
            PDStack(model=topology.model_name) as plain,
            aiohttp.ClientSession() as session,
            session.post(f"{plain.router_url}/v1/chat/completions", json=body) as response,
        ):
            answers.append((response.status, await response.json()))
        return answers

    (s1, first), (s2, second), (s3, unflagged) = asyncio.run(run())
    assert (s1, s2, s3) == (200, 200, 200), (first, second, unflagged)
    for answer in (first, second, unflagged):
        assert answer["id"].startswith("chatcmpl-") and not answer["id"].startswith("chatcmpl-chatcmpl")
        assert not answer["id"].endswith("-0")
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    reused = second["usage"]["prompt_tokens_details"]
    assert 0 < reused["cached_tokens"] < second["usage"]["prompt_tokens"]
    assert set(reused) == {"cached_tokens", "created_cache_tokens", "multimodal_tokens"}
    assert unflagged["usage"]["prompt_tokens_details"] is None  # vLLM's default, without the flag
