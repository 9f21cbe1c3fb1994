"""The topology page lists a slow request; its trace opens as a waterfall naming the hop with no span."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from telemetry.tests.test_browser_live import browser_type_launch_args, login
from tests.support import subprocess_env, uvicorn_server
from traces.models import Span, Trace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
__all__ = ["browser_type_launch_args"]
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def engine_span(span_id: str, instance: str, start: datetime, seconds: dict[str, float], tokens: int) -> Span:
    e2e = sum(seconds.values())
    return Span(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id="a" * 16,
        name="llm_request",
        service_name="vllm",
        instance=instance,
        kind=2,
        start=start,
        end=start + timedelta(seconds=e2e),
        attributes={
            "gen_ai.latency.time_in_queue": seconds["queue"],
            "gen_ai.latency.time_in_model_prefill": seconds["prefill"],
            "gen_ai.latency.time_in_model_decode": seconds["decode"],
            "gen_ai.latency.e2e": e2e,
            "gen_ai.usage.prompt_tokens": 1003,
            "gen_ai.usage.completion_tokens": tokens,
        },
    )


def test_a_slow_request_opens_as_a_waterfall(page, operator, make_topology):
    topology = make_topology()
    start = datetime.now(UTC) - timedelta(minutes=2)
    Trace.objects.create(
        trace_id=TRACE,
        created=start,
        topology=topology,
        gateway_span_id="a" * 16,
        kept="slow",
        reason="TTFT 1,840 ms over the SLO's 1,000 ms",
        model=topology.model_name,
        endpoint="chat/completions",
        backend="cluster",
        status=200,
        stream=True,
        latency_ms=2450.0,
        ttft_ms=1840.0,
        prompt_tokens=1003,
        completion_tokens=64,
    )
    gateway = Span(
        trace_id=TRACE,
        span_id="a" * 16,
        name="gateway chat/completions",
        service_name="tandem-gateway",
        instance=topology.name,
        kind=2,
        start=start,
        end=start + timedelta(milliseconds=2450),
        attributes={"tandem.backend": "cluster"},
    )
    prefill = engine_span(
        "b" * 16,
        "qwen-prefill-0",
        start + timedelta(milliseconds=20),
        {"queue": 0.9, "prefill": 0.35, "decode": 0},
        1,
    )
    decode = engine_span(
        "c" * 16,
        "qwen-decode-0",
        start + timedelta(milliseconds=40),
        {"queue": 1.5, "prefill": 0.05, "decode": 0.8},
        64,
    )
    Span.objects.bulk_create([gateway, prefill, decode])
    os.makedirs("var/screenshots", exist_ok=True)
    with uvicorn_server(subprocess_env()) as base:
        login(page, base, operator)
        for width, height in ((1440, 900), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{base}/topologies/{topology.pk}/#traces")
            panel = page.locator("#traces")
            assert "over the SLO" in panel.inner_text()
            panel.screenshot(path=f"var/screenshots/traces-panel-{width}.png")
            panel.locator("a", has_text=TRACE[:12]).click()
            page.wait_for_url(f"{base}/traces/{TRACE}/")
            rows = page.locator(".wf-row")
            assert rows.count() == 3
            assert page.locator(".wf-prefill [data-phase=queue]").count() == 1
            assert "router exports no spans" in page.locator(".wf-missing").inner_text()
            page.screenshot(path=f"var/screenshots/trace-waterfall-{width}.png", full_page=True)
