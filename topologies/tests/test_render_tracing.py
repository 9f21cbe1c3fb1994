"""Tracing in the rendered engines: vLLM's OTLP flags and the OpenTelemetry SDK's env (pure)."""

from __future__ import annotations

import pytest

from topologies.presets import preset_spec
from topologies.render.engine import command_and_args, container_env
from topologies.spec import SpecError, TopologySpec


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
