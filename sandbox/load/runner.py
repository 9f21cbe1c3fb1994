"""Replay a workload open-loop against an OpenAI-compatible endpoint and measure what clients feel.

Open loop: every request is sent at its scheduled time whatever the server does, and TTFT and
end-to-end latency are measured from that scheduled time (so queueing inside the generator or the
server counts against the server, never hides it). Requests stream (`stream: true` with
`include_usage`); TBT is the gap between successive content chunks.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp

from sandbox.load.report import LoadReport, RequestResult, build_report
from sandbox.load.workload import PlannedRequest, Workload, plan


def endpoint_url(url: str, chat: bool) -> str:
    base = url.rstrip("/")
    if base.endswith(("/chat/completions", "/completions")):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + ("/chat/completions" if chat else "/completions")


async def run_load(
    url: str,
    model: str,
    rate: float,
    duration: float,
    pattern: str = "constant",
    shared_prefix_fraction: float = 0.0,
    prefix_tokens: int = 1024,
    ttft_slo_ms: float = 500.0,
    tbt_slo_ms: float = 50.0,
    prompt_tokens: int = 256,
    max_tokens: int = 64,
    phase_seconds: float | None = None,
    chat: bool = True,
    request_timeout: float = 60.0,
    api_key: str | None = None,
    seed: int = 7,
) -> LoadReport:
    workload = Workload(
        rate=rate,
        duration=duration,
        pattern=pattern,
        shared_prefix_fraction=shared_prefix_fraction,
        prefix_tokens=prefix_tokens,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        phase_seconds=phase_seconds,
        seed=seed,
    )
    requests = plan(workload)
    target = endpoint_url(url, chat)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=request_timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:
        start = time.monotonic() + 0.05
        tasks = [
            asyncio.create_task(_one(session, target, model, chat, planned, start + planned.at))
            for planned in requests
        ]
        results = await asyncio.gather(*tasks)
    wall = max(time.monotonic() - start, 1e-9)
    return build_report(
        url=url,
        model=model,
        pattern=pattern,
        target_rate=rate,
        duration_s=duration,
        wall_s=wall,
        results=results,
        ttft_slo_ms=ttft_slo_ms,
        tbt_slo_ms=tbt_slo_ms,
    )


def _body(model: str, chat: bool, planned: PlannedRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": planned.max_tokens,
        "ignore_eos": True,  # a fixed output length, as vLLM's benchmark tool asks for
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if chat:
        body["messages"] = [{"role": "user", "content": planned.prompt}]
    else:
        body["prompt"] = planned.prompt
    return body


async def _one(
    session: aiohttp.ClientSession, url: str, model: str, chat: bool, planned: PlannedRequest, due: float
) -> RequestResult:
    result = RequestResult(kind=planned.kind, shared=planned.shared, ok=False)
    delay = due - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    result.late = max(0.0, time.monotonic() - due)
    last: float | None = None
    try:
        async with session.post(url, json=_body(model, chat, planned)) as response:
            if response.status != 200:
                await response.read()
                result.error = f"http_{response.status}"
                return result
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                try:
                    event = json.loads(data)
                except json.JSONDecodeError:
                    result.error = "non_json"
                    return result
                if "error" in event:
                    result.error = "stream_error"
                    return result
                if event.get("usage"):
                    usage = event["usage"]
                    result.output_tokens = int(usage.get("completion_tokens") or 0)
                    result.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                    result.cached_tokens = int(
                        (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                    )
                if not _has_content(event):
                    continue
                now = time.monotonic()
                if last is None:
                    result.ttft = now - due
                else:
                    result.itls.append(now - last)
                last = now
    except TimeoutError:
        result.error = "timeout"
        return result
    except aiohttp.ClientError as exc:
        result.error = type(exc).__name__
        return result
    if result.ttft is None:
        result.error = "no_tokens"
        return result
    result.ok = True
    result.e2e = time.monotonic() - due
    return result


def _has_content(event: dict[str, Any]) -> bool:
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or choice.get("text"):
            return True
    return False
