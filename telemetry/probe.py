"""Tandem's own probe request through one prefill → decode pair (vLLM's disaggregated protocol).

Connector metrics carry no peer label and a router picks pairs itself, so the only way to know that
*this* prefill pod can hand KV to *that* decode pod is to send a request through exactly that pair, the
way vLLM's P/D proxies do: the prompt to the prefill pod with ``kv_transfer_params.do_remote_decode``
and ``max_tokens: 1``; its answer's ``kv_transfer_params`` to the decode pod, which pulls the KV over
the link and answers one token. The request carries ``X-Request-Id: tandem-probe-...``, which vLLM makes
the request id, so a connector log line about that request (NIXL, Mooncake) is this pair's.

A probe is one short prompt (a few tokens) per pair per interval, counted in the engines' metrics like
any request. Engines that speak this protocol: vLLM and vllm-ascend (NIXL, Mooncake, LMCache,
LLM-DataDist connectors). SGLang pairs by bootstrap room and MindIE by its own coordinator: they are
not probed (the page says so).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl as ssl_
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

import aiohttp

from telemetry.logscan import PROBE_ID_PREFIX

PROBED_ENGINES = frozenset({"vllm", "vllm-ascend"})
PROBE_PROMPT = "Tandem KV link probe."
MAX_PROBES = 16  # pairs probed per interval; more pairs are probed in turns
_counter = itertools.count(1)


class ProbeTarget(TypedDict):
    prefill: str
    decode: str
    prefill_url: str  # http://ip:port
    decode_url: str
    model: str


class ProbeResult(TypedDict):
    prefill: str
    decode: str
    ok: bool
    stage: Literal["prefill", "decode"] | None  # where it failed
    status: int | None  # the failing answer's HTTP status (None: no answer)
    error: str | None
    ms: float | None  # the decode pod's answer time: the KV pull plus one token
    request_id: str
    ts: float  # when it ended (unix s)
    # The prefill returned no kv_transfer_params: its connector hands KV over by prompt (vLLM's
    # ExampleConnector, LMCache), so the decode got the request as it came, as vLLM's proxy sends it.
    by_prompt: NotRequired[bool]


def new_request_id() -> str:
    return f"{PROBE_ID_PREFIX}{int(time.time())}-{next(_counter)}"


def _error_text(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:120].decode("utf-8", "replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)[:200]
        return str(error or data.get("message") or data)[:200]
    return str(data)[:200]


async def _post(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    request_id: str,
    timeout: float,
    transport: ProbeTransport,
) -> tuple[int, bytes]:
    headers = {**(transport.headers or {}), "X-Request-Id": request_id, "Content-Type": "application/json"}
    async with session.post(
        url,
        data=json.dumps(body),
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=timeout),
        ssl=transport.ssl,
    ) as response:
        return response.status, await response.read()


@dataclass(frozen=True)
class ProbeTransport:
    """How probes reach the pods: directly, or through the API server's pods proxy (its auth and TLS)."""

    headers: Mapping[str, str] | None = None
    ssl: ssl_.SSLContext | bool = True


DIRECT_PROBES = ProbeTransport()


async def probe_pair(
    session: aiohttp.ClientSession,
    target: ProbeTarget,
    *,
    timeout_s: float,
    transport: ProbeTransport = DIRECT_PROBES,
) -> ProbeResult:
    """Send one probe through the pair; never raises (a failure is a result)."""
    request_id = new_request_id()
    deadline = time.monotonic() + timeout_s
    result = ProbeResult(
        prefill=target["prefill"], decode=target["decode"], ok=False, stage="prefill", status=None,
        error=None, ms=None, request_id=request_id, ts=time.time(),
    )  # fmt: skip
    body: dict[str, Any] = {
        "model": target["model"],
        "prompt": PROBE_PROMPT,
        "max_tokens": 1,
        "stream": False,
        "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False},
    }
    url = f"{target['prefill_url']}/v1/completions"
    try:
        status, data = await _post(session, url, body, request_id, timeout_s, transport)
        if status != 200:
            result["status"] = status
            result["error"] = f"prefill answered HTTP {status}: {_error_text(data)}"
            return _done(result)
        try:
            params = json.loads(data).get("kv_transfer_params")
        except (ValueError, AttributeError):
            params = None
        result["stage"] = "decode"
        started = time.monotonic()
        left = max(0.05, deadline - started)
        url = f"{target['decode_url']}/v1/completions"
        if isinstance(params, dict):
            decode_body = {**body, "kv_transfer_params": params}
        else:
            decode_body = {k: v for k, v in body.items() if k != "kv_transfer_params"}
            result["by_prompt"] = True
        status, data = await _post(session, url, decode_body, request_id, left, transport)
        if status != 200:
            result["status"] = status
            result["error"] = f"decode answered HTTP {status}: {_error_text(data)}"
            return _done(result)
        result["ok"] = True
        result["stage"] = None
        result["status"] = status
        result["ms"] = (time.monotonic() - started) * 1000
    except TimeoutError:
        result["error"] = f"no answer from the {result['stage']} pod within {timeout_s:.1f} s"
    except aiohttp.ClientError as exc:
        result["error"] = f"cannot reach the {result['stage']} pod: {exc.__class__.__name__} {exc}".strip()
    return _done(result)


def _done(result: ProbeResult) -> ProbeResult:
    result["ts"] = time.time()
    return result


async def probe_all(
    session: aiohttp.ClientSession,
    targets: list[ProbeTarget],
    *,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    ssl: ssl_.SSLContext | bool = True,
) -> list[ProbeResult]:
    if not targets:
        return []
    transport = ProbeTransport(headers=headers, ssl=ssl)
    return list(
        await asyncio.gather(
            *(probe_pair(session, t, timeout_s=timeout_s, transport=transport) for t in targets)
        )
    )


def choose(pairs: list[tuple[str, str]], turn: int, limit: int = MAX_PROBES) -> list[tuple[str, str]]:
    """The pairs to probe this interval: all of them, or ``limit`` in turns (round robin)."""
    if len(pairs) <= limit:
        return pairs
    start = (turn * limit) % len(pairs)
    return [pairs[(start + i) % len(pairs)] for i in range(limit)]
