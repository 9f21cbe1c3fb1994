"""The waterfall of a trace: engines split into queue, prefill and decode; every silent hop named (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from traces.waterfall import SpanRow, build

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def span(span_id, parent, name, service, instance, start_ms, end_ms, **attributes):
    return SpanRow(
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        service_name=service,
        instance=instance,
        start=T0 + timedelta(milliseconds=start_ms),
        end=T0 + timedelta(milliseconds=end_ms),
        status_code=0,
        attributes=attributes,
    )


GATEWAY = span("a" * 16, "", "gateway chat/completions", "tandem-gateway", "qwen", 0, 1000)
PREFILL = span(
    "b" * 16, "a" * 16, "llm_request", "vllm", "qwen-prefill-0", 100, 400,
    **{"gen_ai.latency.time_in_queue": 0.1, "gen_ai.latency.time_in_model_prefill": 0.2,
       "gen_ai.usage.completion_tokens": 1, "tandem.role": "prefill"},
)  # fmt: skip
TRACE = {"status": 200, "backend": "cluster", "prompt_tokens": 900, "completion_tokens": 20}


def test_an_engine_span_is_split_into_its_phases_on_the_traces_axis():
    waterfall = build(TRACE, [GATEWAY, PREFILL], engine="vllm", tracing="on", has_router=True)
    gateway, prefill = waterfall.bars
    assert (gateway.hop, prefill.hop, prefill.depth) == ("gateway", "prefill", 1)
    assert (prefill.left_pct, prefill.width_pct) == (10.0, 30.0)
    assert prefill.segments == [("queue", 10.0, 10.0), ("prefill", 20.0, 20.0)]
    assert "queue 100 ms" in prefill.detail and "prefill 200 ms" in prefill.detail


def test_every_hop_without_a_span_is_named_with_why():
    missing = build(TRACE, [GATEWAY, PREFILL], engine="vllm", tracing="on", has_router=True).missing
    assert any(note.startswith("The router exports no spans") for note in missing)
    assert any("decode engine sent no span: tracing off or endpoint unreachable" in note for note in missing)
    off = build(TRACE, [GATEWAY], engine="vllm", tracing="off", has_router=True).missing
    assert any("prefill engine sent no span: tracing is off for this topology" in note for note in off)
    sglang = build(TRACE, [GATEWAY], engine="sglang", tracing="on", has_router=True).missing
    assert any("decode engine sent no span" in n and "initialize opentelemetry error" in n for n in sglang)
    mindie = build(TRACE, [GATEWAY], engine="mindie", tracing="on", has_router=True).missing
    assert any("prefill engine sent no span" in n and "ms-trace-forwarder" in n for n in mindie)
    assert any("no queue, prefill, decode or KV transfer split" in n for n in mindie)
    fallback = build(
        {**TRACE, "backend": "fallback"}, [GATEWAY], engine="vllm", tracing="on", has_router=True
    )
    assert fallback.missing == [
        "The fallback upstream answered: it is outside the cluster and sends Tandem no spans."
    ]


def test_cached_tokens_are_read_from_the_answers_usage_when_it_has_them():
    from gateway.sse import cached_of

    assert cached_of({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 768}}) == 768
    assert cached_of({"prompt_tokens": 900, "prompt_tokens_details": None}) is None
    assert cached_of({"prompt_tokens": 900}) is None
    waterfall = build(
        {**TRACE, "cached_tokens": 768}, [GATEWAY], engine="vllm", tracing="on", has_router=True
    )
    assert waterfall.tokens == {"prompt": 900, "output": 20, "cached": 768}


def test_an_engines_own_span_names_its_hop_as_sent():
    """SGLang's and MindIE's spans are not vLLM's llm_request: shown under their own names, and the role
    their resource says (Tandem's manifests set tandem.role) is not reported as silent."""
    req = span(
        "c" * 16, "a" * 16, "Req 8f2c", "qwen-decode", "qwen-decode-0", 120, 900, **{"tandem.role": "decode"}
    )
    waterfall = build(TRACE, [GATEWAY, req], engine="sglang", tracing="on", has_router=False)
    assert [(b.label, b.hop, b.instance) for b in waterfall.bars][1] == ("Req 8f2c", "other", "qwen-decode-0")
    assert not any("decode engine sent no span" in note for note in waterfall.missing)
    assert any("prefill engine sent no span" in note for note in waterfall.missing)
    assert any(note.startswith("SGLang's spans carry its own names") for note in waterfall.missing)
