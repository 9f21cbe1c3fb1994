"""OTLP trace ingestion: spans stored per second of the receiving worker's CPU, and storage per request.

In one process, as the gateway's worker runs it: POST /v1/traces through the ASGI app (key check and
its Redis round trip, body read, protobuf decode in a worker thread, the keep decision, one COPY into
traces_span), with export requests shaped as vLLM sends them (its `llm_request` span with its
gen_ai.* attributes, 2 per request: prefill and decode; batches of --batch spans, as the SDK's
BatchSpanProcessor sends up to 512). Worker CPU is this process's (all its threads); PostgreSQL's and
Redis's own CPU is not counted. Three cases: every trace kept (TRACES_HEAD_SAMPLE_RATE=1: the store
path), every trace already decided not kept (the drop path), and undecided (parked in Redis). Then the
bytes of traces_span and traces_trace (table, indexes, TOAST) per request kept, and per million
requests at the default sampling (1 % head-sampled plus the slow and failed ones, --tail %).
Target: ≥ 5,000 spans/s per worker CPU-second.

    .venv/bin/python bench/otlp_ingest.py [--requests 20000] [--batch 512] [--tail 2]

Environment: BENCH_DATABASE_URL (postgres://postgres@127.0.0.1:5432/tandem_bench_traces, created and
migrated when missing), BENCH_REDIS_URL (redis://127.0.0.1:6379/13).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from telemetry_fanout import apply_env, ensure_database

ATTRIBUTES = (
    ("gen_ai.latency.time_to_first_token", 0.231),
    ("gen_ai.latency.e2e", 1.873),
    ("gen_ai.latency.time_in_queue", 0.012),
    ("gen_ai.latency.time_in_model_prefill", 0.208),
    ("gen_ai.latency.time_in_model_decode", 1.640),
    ("gen_ai.latency.time_in_model_inference", 1.848),
)


def export_body(trace_ids: list[str], role: str) -> bytes:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    request = trace_service_pb2.ExportTraceServiceRequest()
    group = request.resource_spans.add()
    for key, value in (
        ("service.name", "qwen-" + role),
        ("service.instance.id", f"qwen-{role}-0"),
        ("tandem.role", role),
        ("vllm.instrumenting_module_name", "vllm.llm_engine"),
    ):
        kv = group.resource.attributes.add()
        kv.key, kv.value.string_value = key, value
    scope = group.scope_spans.add()
    scope.scope.name = "vllm.tracing.otel"
    now = time.time_ns()
    for trace_id in trace_ids:
        span = scope.spans.add()
        span.trace_id, span.span_id = bytes.fromhex(trace_id), os.urandom(8)
        span.parent_span_id, span.name, span.kind = os.urandom(8), "llm_request", 2
        span.start_time_unix_nano, span.end_time_unix_nano = now - 1_873_000_000, now
        for name, seconds in ATTRIBUTES:
            kv = span.attributes.add()
            kv.key, kv.value.double_value = name, seconds
        for name, count in (("gen_ai.usage.prompt_tokens", 1003), ("gen_ai.usage.completion_tokens", 64)):
            kv = span.attributes.add()
            kv.key, kv.value.int_value = name, count
        kv = span.attributes.add()
        kv.key, kv.value.string_value = "gen_ai.request.id", "chatcmpl-" + trace_id[:16]
    return request.SerializeToString()


async def post(body: bytes, secret: str) -> int:
    from gateway.app import application

    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    headers = [(b"content-type", b"application/x-protobuf"), (b"authorization", f"Bearer {secret}".encode())]
    scope = {
        "type": "http",
        "path": "/v1/traces",
        "method": "POST",
        "headers": headers,
        "client": ("127.0.0.1", 1),
    }
    await application(scope, receive, send)
    return status


def run_case(bodies: list[bytes], secret: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to post every body."""

    async def go() -> None:
        for body in bodies:
            status = await post(body, secret)
            if status != 200:
                raise RuntimeError(f"/v1/traces answered {status}")

    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(go())
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=512, help="spans per export request")
    parser.add_argument("--tail", type=float, default=2.0, help="% of requests slow or failed (always kept)")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tandem_bench_traces")
    os.environ.setdefault("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    apply_env()
    ensure_database()
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from accounts.models import User
    from keys import limits
    from keys.services import key_create
    from traces.models import Span, Trace
    from traces.services import kept_key

    admin, _ = User.objects.get_or_create(username="bench-traces-admin", defaults={"role": "admin"})
    secret = key_create(
        actor=admin, owner=admin, name=f"engines {time.strftime('%H:%M:%S')}", purpose="telemetry"
    ).secret
    Span.objects.all().delete()
    Trace.objects.all().delete()

    def bodies_for(trace_ids: list[str]) -> list[bytes]:
        per = args.batch // 2
        out = []
        for i in range(0, len(trace_ids), per):
            chunk = trace_ids[i : i + per]
            out += [export_body(chunk, "prefill"), export_body(chunk, "decode")]
        return out

    spans = 2 * args.requests
    print(f"{args.requests:,} requests, 2 llm_request spans each ({spans:,} spans), ", end="")
    print(f"{args.batch} spans per export request")
    cases = {}
    settings.TRACES_HEAD_SAMPLE_RATE = 1.0
    kept_ids = [os.urandom(16).hex() for _ in range(args.requests)]
    cases["stored (kept)"] = run_case(bodies_for(kept_ids), secret)
    settings.TRACES_HEAD_SAMPLE_RATE = 0.0
    dropped_ids = [os.urandom(16).hex() for _ in range(args.requests)]
    pipe = limits.client().pipeline(transaction=False)
    for trace_id in dropped_ids:
        pipe.set(kept_key(trace_id), b"0", ex=600)
    pipe.execute()
    cases["dropped (not kept)"] = run_case(bodies_for(dropped_ids), secret)
    cases["parked (undecided)"] = run_case(
        bodies_for([os.urandom(16).hex() for _ in range(args.requests)]), secret
    )
    print(f"{'case':22}{'CPU s':>8}{'wall s':>8}{'spans/s per CPU-s':>20}{'spans/s wall':>14}")
    for name, (cpu, wall) in cases.items():
        print(f"{name:22}{cpu:>8.2f}{wall:>8.2f}{spans / cpu:>20,.0f}{spans / wall:>14,.0f}")
    stored = Span.objects.count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('traces_span'), pg_total_relation_size('traces_trace')")
        span_bytes, trace_bytes = cursor.fetchone()
    per_request = span_bytes / (stored / 2)
    # the gateway's own span and Trace row per kept request: measured on a sample written by the service
    from datetime import UTC, datetime

    from traces.services import GatewayTrace, gateway_traces_store

    sample = 2_000
    now = datetime.now(UTC)
    before_span = span_bytes
    gateway_traces_store(
        records=[
            GatewayTrace(
                trace_id=os.urandom(16).hex(), span_id=os.urandom(8).hex(), parent_span_id="", kept="slow",
                reason="TTFT 1,840 ms over the SLO's 1,000 ms", start=now, end=now, topology_id=None,
                topology_name="qwen", model="Qwen/Qwen3-0.6B", endpoint="chat/completions", backend="cluster",
                status=200, error_code="", stream=True, latency_ms=2450.0, ttft_ms=1840.0, prompt_tokens=1003,
                completion_tokens=64,
            )
            for _ in range(sample)
        ]
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('traces_span'), pg_total_relation_size('traces_trace')")
        after_span, after_trace = cursor.fetchone()
    gateway_part = (after_span - before_span + after_trace - trace_bytes) / sample
    kept_request = per_request + gateway_part
    share = 0.01 + args.tail / 100
    gib = kept_request * 1e6 / 2**30
    print(
        f"storage: {per_request:,.0f} B of engine spans + {gateway_part:,.0f} B of gateway span and Trace row"
    )
    print(f"  = {kept_request:,.0f} B per kept request ({gib:,.2f} GiB per million kept requests)")
    mib = kept_request * share * 1e6 / 2**20
    print(f"  at 1 % head-sampled + {args.tail:g} % slow or failed: {mib:,.0f} MiB per million requests")


if __name__ == "__main__":
    main()
