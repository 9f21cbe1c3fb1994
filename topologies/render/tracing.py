"""The engines' tracing in the rendered pods (pure): each engine's own switches, pointed at Tandem's OTLP
receiver (``tracing.endpoint``) when the spec's tracing is on. docs/traces.md says what each engine
offers and where that is read from."""

from __future__ import annotations

from typing import Any

from topologies.spec import TopologySpec

ENGINE_ID_ENV = "TANDEM_ENGINE_ID"  # the engine's instance id: its pod's name (engine.container_env)


def _env(name: str, value: str | int) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


TRACE_FORWARDER = "ms-trace-forwarder"  # MindIE: msServiceProfiler's OTLP forwarder, beside the engine


def traced(spec: TopologySpec) -> bool:
    """Whether the engines send their spans to Tandem (docs/traces.md says what each offers): vLLM (and
    vllm-ascend) and SGLang take an OTLP endpoint; MindIE's requests are traced by msServiceProfiler
    (``MS_TRACE_ENABLE``) and forwarded by its forwarder process, run as a sidecar."""
    return spec.tracing.mode != "off"


def tracing_args(spec: TopologySpec) -> list[str]:
    """The engine's own tracing flags:

    * vLLM: ``--otlp-traces-endpoint`` (its ``llm_request`` span per request) and, for ``detailed``,
      ``--collect-detailed-traces all`` (its model and worker spans too; costly);
    * SGLang (``python/sglang/srt/server_args.py``: ``enable_trace``, ``trace_modules``,
      ``otlp_traces_endpoint``): ``--enable-trace --otlp-traces-endpoint URL``; ``detailed`` with the
      Mooncake transfer backend also traces it (``--trace-modules request,mooncake``);
    * MindIE: none (its switch is an env value, ``tracing_env``)."""
    if not traced(spec):
        return []
    if spec.engine == "sglang":
        args = ["--enable-trace", "--otlp-traces-endpoint", spec.tracing.endpoint]
        if spec.tracing.mode == "detailed" and spec.connector.type == "mooncake":
            args += ["--trace-modules", "request,mooncake"]
        return args
    if spec.engine == "mindie":
        return []
    args = ["--otlp-traces-endpoint", spec.tracing.endpoint]
    if spec.tracing.mode == "detailed":
        args += ["--collect-detailed-traces", "all"]
    return args


def otel_env(spec: TopologySpec, role: str, *, generic: bool = False) -> list[dict[str, Any]]:
    """The OpenTelemetry SDK's settings: OTLP over HTTP/protobuf (vLLM's and SGLang's default is gRPC,
    which Tandem does not serve), the span's service and instance (the pod's name) and role, the key's
    header. ``generic``: the ``OTEL_EXPORTER_OTLP_*`` names (msServiceProfiler's forwarder reads those,
    the endpoint among them) instead of the traces-only ones."""
    kind = "" if generic else "TRACES_"
    env = [_env(f"OTEL_EXPORTER_OTLP_{kind}PROTOCOL", "http/protobuf")]
    if generic:
        env.append(_env("OTEL_EXPORTER_OTLP_ENDPOINT", spec.tracing.endpoint))
    env += [
        _env("OTEL_SERVICE_NAME", f"{spec.name}-{role}"),
        _env("OTEL_RESOURCE_ATTRIBUTES", f"service.instance.id=$({ENGINE_ID_ENV}),tandem.role={role}"),
    ]
    if spec.tracing.headers_secret:
        name, _, key = spec.tracing.headers_secret.partition("/")
        env.append(
            {
                "name": f"OTEL_EXPORTER_OTLP_{kind}HEADERS",
                "valueFrom": {"secretKeyRef": {"name": name, "key": key}},
            }
        )
    return env


def tracing_env(spec: TopologySpec, role: str) -> list[dict[str, Any]]:
    """The engine container's tracing env: the SDK's settings (vLLM, SGLang), or for MindIE
    msServiceProfiler's switch ``MS_TRACE_ENABLE=1`` (the forwarder sidecar exports)."""
    if not traced(spec):
        return []
    if spec.engine == "mindie":
        return [_env("MS_TRACE_ENABLE", "1")]
    return otel_env(spec, role)


def trace_forwarder(spec: TopologySpec, role: str) -> dict[str, Any] | None:
    """MindIE's OTLP export: msServiceProfiler's forwarder (``python -m ms_service_profiler.trace``) in
    the engine's pod (its network namespace and user, as msServiceProfiler requires), same image."""
    if not traced(spec) or spec.engine != "mindie":
        return None
    return {
        "name": TRACE_FORWARDER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-m", "ms_service_profiler.trace"],
        "env": [_field_env(ENGINE_ID_ENV, "metadata.name"), *otel_env(spec, role, generic=True)],
    }
