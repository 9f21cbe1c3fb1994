"""One request, one trace, with a real vLLM 0.32 (CPU build, the real-engine lane's tiny model) exporting its
own `llm_request` span over OTLP/HTTP (protobuf) to the gateway's /v1/traces, authenticated by a telemetry
key, exactly as the renderer configures it (``--otlp-traces-endpoint`` and the OTEL_* environment): the
engine reads the gateway's `traceparent`, so its span lands under the gateway's; a request within the SLO is
not kept, one over it is; the router, which exports no spans, is named on the waterfall.

Marked `real_engine`: it runs in `make real`, alone on the CPU (the engine's start takes both cores)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from gateway.services import bump_routes, route_update
from gateway.tests.conftest import running_gateway
from gateway.tests.test_traces_end_to_end import CALLER_TRACE, wait_for
from realengine.engine import MODEL_NAME, Engine
from tests.support import free_port
from traces.models import Span, Trace

pytestmark = pytest.mark.real_engine


def _chat(base: str, secret: str, headers: dict[str, str] | None = None) -> requests.Response:
    return requests.post(
        f"{base}/v1/chat/completions",
        json={
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": "hello there"}],
            "max_tokens": 4,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        headers={"Authorization": f"Bearer {secret}", **(headers or {})},
        timeout=120,
    )


@pytest.mark.django_db(transaction=True)
def test_a_real_vllm_span_lands_under_the_gateways_and_only_slow_requests_are_kept(
    make_topology, inference_key, admin_user, tmp_path: Path
) -> None:
    from topologies.models import Topology
    from traces.selectors import trace_waterfall

    topology = make_topology()
    Topology.objects.filter(pk=topology.pk).update(engine="vllm", model_name=MODEL_NAME, slo_ttft_ms=60_000)
    topology.refresh_from_db()
    app = inference_key().secret
    telemetry = inference_key(name="engines", purpose="telemetry").secret
    log = tmp_path / "gateway.log"
    with running_gateway(log, TRACES_HEAD_SAMPLE_RATE="0") as base:
        engine = Engine(
            host="127.0.0.1",
            port=free_port(),
            log=tmp_path / "vllm.log",
            args=["--otlp-traces-endpoint", f"{base}/v1/traces"],
            env={  # what topologies/render/engine.py sets beside the flag
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"Authorization=Bearer%20{telemetry}",
                "OTEL_SERVICE_NAME": f"{topology.name}-decode",
                "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=decode-0-0,tandem.role=decode",
                "OTEL_BSP_SCHEDULE_DELAY": "200",
            },
        ).start()
        try:
            engine.wait_ready()
            route_update(topology=topology, changes={"endpoint_url": engine.base}, actor=admin_user)
            time.sleep(1.2)  # the gateway looks for route changes twice a second

            normal = _chat(base, app)
            assert normal.status_code == 200, normal.text
            normal_trace = normal.headers["x-tandem-trace-id"]
            # The engine's span of the normal request arrives and is dropped (the request was within its SLO).
            time.sleep(1.5)

            Topology.objects.filter(pk=topology.pk).update(slo_ttft_ms=1)  # every request is now slow
            bump_routes()
            time.sleep(1.2)
            parent = {"traceparent": f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"}
            slow = _chat(base, app, parent)
            assert slow.status_code == 200, slow.text
            assert slow.headers["x-tandem-trace-id"] == CALLER_TRACE
            engine_span = wait_for(
                lambda: Span.objects.filter(trace_id=CALLER_TRACE, name="llm_request").first(), 15
            )
            assert engine_span is not None, engine.tail() + log.read_text()[-3000:]
        finally:
            engine.stop()
    trace = Trace.objects.get(trace_id=CALLER_TRACE)
    assert trace.kept == "slow" and trace.reason.startswith("TTFT")
    gateway_span = Span.objects.get(trace_id=CALLER_TRACE, span_id=trace.gateway_span_id)
    assert gateway_span.parent_span_id == "00f067aa0ba902b7"
    # vLLM's own span, under the gateway's, with the attributes the waterfall reads (the sandbox's simulated
    # engines are held to these names by the sandbox test beside this one).
    assert engine_span.parent_span_id == gateway_span.span_id
    assert engine_span.instance == "decode-0-0"
    for name in (
        "gen_ai.latency.time_in_queue",
        "gen_ai.latency.time_to_first_token",
        "gen_ai.usage.prompt_tokens",
        "gen_ai.usage.completion_tokens",
    ):
        assert name in engine_span.attributes, sorted(engine_span.attributes)
    assert not Trace.objects.filter(trace_id=normal_trace).exists()
    assert not Span.objects.filter(trace_id=normal_trace).exists()
    waterfall = trace_waterfall(trace=trace)
    assert [b.hop for b in waterfall.bars][:1] == ["gateway"]
    assert "decode" in {b.hop for b in waterfall.bars}
    assert any("router exports no spans" in note for note in waterfall.missing), waterfall.missing
