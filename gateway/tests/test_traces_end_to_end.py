"""One request, one trace: through a real gateway process to simulated vLLM engines exporting their
`llm_request` spans over OTLP to the gateway's /v1/traces; a slow request is kept by tail sampling
with the engines' spans under the gateway's, a normal one is not, and the router's missing span is named."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

from gateway.services import route_update
from gateway.tests.conftest import MODEL, running_gateway
from sandbox.engine.faults import Fault
from sandbox.engine.testing import PDStack
from traces.models import Span, Trace

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


async def chat(base: str, secret: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 4,
        "stream": True,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{base}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {secret}", **(headers or {})},
        ) as response,
    ):
        await response.read()
        return response.status, response.headers.get("x-tandem-trace-id", "")


def wait_for(check: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    return check()


@pytest.mark.django_db(transaction=True)
def test_a_slow_request_is_one_trace_with_the_engines_spans_under_the_gateways(
    make_topology, inference_key, admin_user, tmp_path
):
    topology = make_topology()
    topology.slo_ttft_ms = 400
    topology.save(update_fields=["slo_ttft_ms"])
    app = inference_key().secret
    engines = inference_key(name="engines", purpose="telemetry").secret
    log = tmp_path / "gateway.log"
    with running_gateway(log, TRACES_HEAD_SAMPLE_RATE="0") as base:

        async def run() -> tuple[tuple[int, str], tuple[int, str]]:
            env = {
                "SANDBOX_TIME_SCALE": "0.05",
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"Authorization=Bearer%20{engines}",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
                "OTEL_SERVICE_NAME": "vllm",
            }
            args = (MODEL, "--otlp-traces-endpoint", f"{base}/v1/traces", "--enable-prompt-tokens-details")
            async with PDStack(model=MODEL, env=env, args=args) as stack:
                await asyncio.to_thread(
                    route_update,
                    topology=topology,
                    changes={"endpoint_url": stack.router_url},
                    actor=admin_user,
                )
                await asyncio.sleep(1.2)  # the gateway looks for route changes twice a second
                normal = await chat(base, app)
                decode = stack.farm.engine("sim/decode-0-0")
                assert decode is not None
                decode.faults.add(Fault(kind="slow", delay_ms=600.0, count=1))
                parent = {"traceparent": f"00-{CALLER_TRACE}-00f067aa0ba902b7-01", "tracestate": "app=1"}
                slow = await chat(base, app, parent)
                await asyncio.to_thread(
                    wait_for,
                    lambda: Span.objects.filter(trace_id=CALLER_TRACE, name="llm_request").count() == 2,
                    8,
                )
                return normal, slow

        (normal_status, normal_trace), (slow_status, slow_trace) = asyncio.run(run())
        assert (normal_status, slow_status) == (200, 200), log.read_text()[-3000:]
        assert slow_trace == CALLER_TRACE  # the caller's trace continued, and named in the answer
        assert len(normal_trace) == 32 and normal_trace != CALLER_TRACE
        trace = wait_for(lambda: Trace.objects.filter(trace_id=CALLER_TRACE).first(), 5)
    assert trace is not None and trace.kept == "slow", log.read_text()[-3000:]
    assert trace.reason.startswith("TTFT")
    assert trace.cached_tokens is not None and trace.prompt_tokens > 0  # the stream's usage, as vLLM sends it
    spans = {s.span_id: s for s in Span.objects.filter(trace_id=CALLER_TRACE)}
    gateway = spans[trace.gateway_span_id]
    assert gateway.parent_span_id == "00f067aa0ba902b7"  # under the caller's span
    engine_spans = [s for s in spans.values() if s.name == "llm_request"]
    assert len(engine_spans) == 2
    assert all(s.parent_span_id == gateway.span_id for s in engine_spans)
    assert {s.instance for s in engine_spans} == {"prefill-0-0", "decode-0-0"}
    assert all("gen_ai.latency.time_in_queue" in s.attributes for s in engine_spans)
    assert not Trace.objects.filter(trace_id=normal_trace).exists()  # normal and not head-sampled
    assert not Span.objects.filter(trace_id=normal_trace).exists()  # its engine spans were dropped

    from traces.selectors import trace_waterfall

    waterfall = trace_waterfall(trace=trace)
    assert [b.hop for b in waterfall.bars][:1] == ["gateway"]
    assert {b.hop for b in waterfall.bars} == {"gateway", "prefill", "decode"}
    assert any("router exports no spans" in note for note in waterfall.missing)
