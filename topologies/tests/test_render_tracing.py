"""Tracing in the rendered engines: vLLM's OTLP flags and the OpenTelemetry SDK's env (pure)."""

from __future__ import annotations

import pytest

from topologies.presets import preset_spec
from topologies.render.engine import command_and_args, container_env, pod_spec
from topologies.spec import SpecError, TopologySpec
from topologies.tests.combinations import combination


def spec_with(tracing):
    return TopologySpec.from_dict({**preset_spec("qwen-gpu-nixl"), "tracing": tracing})


def test_tracing_off_renders_no_flag():
    spec = spec_with({})
    _, args = command_and_args(spec, "decode")
    assert "--otlp-traces-endpoint" not in args
    assert not any(e["name"].startswith("OTEL_") for e in container_env(spec, "decode"))


def test_tracing_on_points_vllm_at_tandem_over_http_protobuf_with_the_keys_secret():
    url = "https://tandem.example.com/v1/traces"
    spec = spec_with({"mode": "detailed", "endpoint": url, "headers_secret": "tandem-traces/headers"})
    _, args = command_and_args(spec, "prefill")
    assert args[args.index("--otlp-traces-endpoint") + 1] == url
    assert args[args.index("--collect-detailed-traces") + 1] == "all"
    env = {e["name"]: e for e in container_env(spec, "prefill")}
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]["value"] == "http/protobuf"
    resource = env["OTEL_RESOURCE_ATTRIBUTES"]["value"]
    assert resource == "service.instance.id=$(TANDEM_ENGINE_ID),tandem.role=prefill"
    assert env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"]["valueFrom"]["secretKeyRef"] == {
        "name": "tandem-traces",
        "key": "headers",
    }


@pytest.mark.parametrize(
    ("tracing", "field"),
    [
        ({"mode": "on"}, "tracing.endpoint"),
        ({"mode": "loud", "endpoint": "https://t/v1/traces"}, "tracing.mode"),
        ({"mode": "on", "endpoint": "tandem:8000"}, "tracing.endpoint"),
        ({"mode": "on", "endpoint": "https://t/v1", "headers_secret": "nokey"}, "tracing.headers_secret"),
    ],
)
def test_a_tracing_mistake_names_its_field(tracing, field):
    with pytest.raises(SpecError) as raised:
        spec_with(tracing)
    assert field in raised.value.errors


def _engine_spec(preset, tracing):
    if preset == "mindie":
        return TopologySpec.from_dict(combination("mindie", "llm-datadist", "kthena", tracing=tracing))
    return TopologySpec.from_dict({**preset_spec(preset), "tracing": tracing})


URL = "https://tandem.example.com/v1/traces"


def test_sglang_gets_its_trace_switch_and_endpoint_over_http_protobuf():
    """SGLang (python/sglang/srt/server_args.py): --enable-trace, --otlp-traces-endpoint, --trace-modules;
    its exporter takes OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (python/sglang/srt/tracing/trace.py)."""
    spec = _engine_spec("qwen-sglang-mooncake", {"mode": "on", "endpoint": URL, "headers_secret": "t/h"})
    _, args = command_and_args(spec, "decode")
    assert "--enable-trace" in args and args[args.index("--otlp-traces-endpoint") + 1] == URL
    assert "--trace-modules" not in args and "--collect-detailed-traces" not in args
    env = {e["name"]: e for e in container_env(spec, "decode")}
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]["value"] == "http/protobuf"
    assert env["OTEL_RESOURCE_ATTRIBUTES"]["value"].endswith("tandem.role=decode")
    assert env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"]["valueFrom"]["secretKeyRef"] == {"name": "t", "key": "h"}
    detailed = _engine_spec("qwen-sglang-mooncake", {"mode": "detailed", "endpoint": URL})
    _, args = command_and_args(detailed, "prefill")
    assert args[args.index("--trace-modules") + 1] == "request,mooncake"
    _, off = command_and_args(_engine_spec("qwen-sglang-mooncake", {}), "decode")
    assert "--enable-trace" not in off and "--otlp-traces-endpoint" not in off


def test_mindie_turns_on_ms_service_profiler_and_runs_its_forwarder_beside_the_engine():
    spec = _engine_spec("mindie", {"mode": "on", "endpoint": URL, "headers_secret": "t/h"})
    pod = pod_spec(spec, "prefill")
    engine, forwarder = pod["containers"]
    assert {e["name"]: e.get("value") for e in engine["env"]}["MS_TRACE_ENABLE"] == "1"
    assert not any(e["name"].startswith("OTEL_") for e in engine["env"])
    assert forwarder["name"] == "ms-trace-forwarder" and forwarder["image"] == engine["image"]
    assert forwarder["command"] == ["python3", "-m", "ms_service_profiler.trace"]
    env = {e["name"]: e for e in forwarder["env"]}
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"]["value"] == "http/protobuf"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == URL
    assert env["OTEL_EXPORTER_OTLP_HEADERS"]["valueFrom"]["secretKeyRef"] == {"name": "t", "key": "h"}
    assert env["TANDEM_ENGINE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert (
        env["OTEL_RESOURCE_ATTRIBUTES"]["value"]
        == "service.instance.id=$(TANDEM_ENGINE_ID),tandem.role=prefill"
    )
    assert len(pod_spec(_engine_spec("mindie", {}), "prefill")["containers"]) == 1
