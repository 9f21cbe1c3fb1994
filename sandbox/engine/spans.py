"""Trace spans as vLLM 0.32 exports them, from the simulated engine, over OTLP/HTTP (JSON).

With `--otlp-traces-endpoint URL` a real vLLM ends each finished request with one span
(`vllm/v1/engine/output_processor.py`, `do_tracing`): name `llm_request`, kind SERVER, from the
request's arrival to its end, parent the incoming `traceparent` (`vllm/tracing/otel.py`,
`extract_trace_context`: the W3C propagator over the request's `traceparent`/`tracestate` headers),
attributes `gen_ai.latency.{time_to_first_token,e2e,time_in_queue,time_in_model_prefill,
time_in_model_decode,time_in_model_inference}` in seconds, `gen_ai.usage.{prompt,completion}_tokens`,
`gen_ai.request.id` and, when the request set them, `gen_ai.request.{max_tokens,top_p,temperature,n}`.
Its resource: what the OpenTelemetry SDK reads from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, plus
`vllm.instrumenting_module_name` and `vllm.process_id`. The SDK's BatchSpanProcessor sends every
OTEL_BSP_SCHEDULE_DELAY ms (5000 by default) with the headers of OTEL_EXPORTER_OTLP_TRACES_HEADERS.

The simulator sends the OTLP JSON encoding (vLLM sends protobuf or gRPC: the same fields), and adds
`host.name` (a pod's hostname is its name) when the resource attributes do not name the instance.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
import weakref
from typing import Any
from urllib.parse import unquote

import aiohttp

from perfmodel.model import clock
from sandbox.engine.vllm_args import VllmArgs

logger = logging.getLogger(__name__)
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
SERVER = 2


def _pairs(text: str) -> dict[str, str]:
    """`k1=v1,k2=v2` (W3C Baggage-like, URL-encoded values) as the OpenTelemetry SDK reads its env."""
    out = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if eq and key.strip():
            out[key.strip()] = unquote(value.strip())
    return out


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v is not None]


def parent_of(headers: Any) -> tuple[str, str] | None:
    """(trace id, parent span id) of a valid incoming traceparent, as the W3C propagator reads it."""
    found = _TRACEPARENT.match(headers.get("traceparent", "") or "")
    if found is None or set(found.group(1)) == {"0"} or set(found.group(2)) == {"0"}:
        return None
    return found.group(1), found.group(2)


class SpanExporter:
    """One engine's batch exporter: spans queued, sent every `delay` seconds in one export request."""

    def __init__(self, endpoint: str, env: dict[str, str], instance: str) -> None:
        self.endpoint = endpoint
        self.headers = {
            "Content-Type": "application/json",
            **_pairs(env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "")),
        }
        resource = _pairs(env.get("OTEL_RESOURCE_ATTRIBUTES", ""))
        resource["service.name"] = (
            env.get("OTEL_SERVICE_NAME") or resource.get("service.name") or "unknown_service"
        )
        if not any(k in resource for k in ("service.instance.id", "k8s.pod.name", "host.name")):
            resource["host.name"] = instance
        resource.update(
            {"vllm.instrumenting_module_name": "vllm.llm_engine", "vllm.process_id": str(os.getpid())}
        )
        self.resource = _attributes(resource)
        self.delay = float(env.get("OTEL_BSP_SCHEDULE_DELAY", "5000")) / 1000
        self.queue: list[dict[str, Any]] = []
        self.task: asyncio.Task[None] | None = None
        self.sent = 0
        self.failed = 0

    def add(self, span: dict[str, Any]) -> None:
        self.queue.append(span)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self.queue:
            await asyncio.sleep(self.delay)
            await self.flush()

    async def flush(self) -> None:
        spans, self.queue = self.queue, []
        if not spans:
            return
        body = {
            "resourceSpans": [
                {
                    "resource": {"attributes": self.resource},
                    "scopeSpans": [{"scope": {"name": "vllm.tracing.otel"}, "spans": spans}],
                }
            ]
        }
        try:
            timeout = aiohttp.ClientTimeout(total=10)
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(self.endpoint, json=body, headers=self.headers) as response,
            ):
                await response.read()
                if response.status >= 300:
                    raise aiohttp.ClientResponseError(
                        response.request_info, (), status=response.status, message=response.reason or ""
                    )
            self.sent += len(spans)
        except (aiohttp.ClientError, TimeoutError, OSError) as error:  # the SDK logs and drops the batch
            self.failed += len(spans)
            logger.warning("Failed to export span batch to %s: %s", self.endpoint, error)


_exporters: weakref.WeakKeyDictionary[Any, SpanExporter | None] = weakref.WeakKeyDictionary()


def exporter_for(engine: Any, args: VllmArgs | None) -> SpanExporter | None:
    """The engine's exporter when it was started with --otlp-traces-endpoint (vLLM engines only)."""
    if engine not in _exporters:
        endpoint = args.values.get("--otlp-traces-endpoint") if args is not None else None
        env = {**os.environ, **engine.spec.env_dict()}
        wanted = bool(endpoint) and engine.spec.engine == "vllm"
        _exporters[engine] = SpanExporter(str(endpoint), env, engine.name) if wanted else None
    return _exporters[engine]


def llm_request_span(seq: Any, body: dict[str, Any], parent: tuple[str, str] | None) -> dict[str, Any]:
    """The `llm_request` span of a finished sequence, with vLLM's attributes."""
    now = clock.now()
    wall = time.time()
    arrival_wall = wall - (now - seq.arrival)
    scheduled = seq.scheduled_at or seq.arrival
    first = seq.first_token_at or scheduled
    last = seq.last_token_at or first
    attributes: dict[str, Any] = {
        "gen_ai.latency.time_to_first_token": first - seq.arrival,
        "gen_ai.latency.e2e": now - seq.arrival,
        "gen_ai.latency.time_in_queue": scheduled - seq.arrival,
        "gen_ai.usage.prompt_tokens": seq.prompt_len,
        "gen_ai.usage.completion_tokens": seq.generated,
        "gen_ai.latency.time_in_model_prefill": first - scheduled,
        "gen_ai.latency.time_in_model_decode": last - first,
        "gen_ai.latency.time_in_model_inference": last - scheduled,
        "gen_ai.request.id": seq.request_id,
    }
    for key, name in (
        ("top_p", "top_p"),
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("n", "n"),
    ):
        value = body.get(key) if isinstance(body, dict) else None
        if value and isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes[f"gen_ai.request.{name}"] = value
    trace_id, parent_id = parent if parent is not None else (os.urandom(16).hex(), "")
    span = {
        "traceId": trace_id,
        "spanId": os.urandom(8).hex(),
        "name": "llm_request",
        "kind": SERVER,
        "startTimeUnixNano": str(int(arrival_wall * 1e9)),
        "endTimeUnixNano": str(int(wall * 1e9)),
        "attributes": _attributes(attributes),
        "status": {"code": 0},
    }
    if parent_id:
        span["parentSpanId"] = parent_id
    return span


def export_finished(engine: Any, request: Any, seq: Any, body: Any) -> None:
    """Queue the span of a request that finished (aborted ones get none, as in vLLM)."""
    from sandbox.engine.vllm_args import parse

    if seq.state != "done" or seq.finish_reason == "abort":
        return
    if engine not in _exporters:
        try:
            args = parse(list(engine.spec.args), ValueError) if engine.spec.engine == "vllm" else None
        except (ValueError, SystemExit):
            args = None
        exporter = exporter_for(engine, args)
    else:
        exporter = _exporters[engine]
    if exporter is not None:
        exporter.add(llm_request_span(seq, body, parent_of(request.headers)))
