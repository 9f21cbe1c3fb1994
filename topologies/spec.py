"""The topology spec: one typed, pure description of a P/D topology, validated the same for API and UI.

``TopologySpec.from_dict(data)`` returns a spec with every default filled in, or raises
``SpecError`` whose ``errors`` map a field path (``roles.prefill.accelerator_count``) to messages
that say what is wrong and how to fix it. ``spec.to_dict()`` is the canonical JSON form stored on
topologies and revisions (equal specs give equal dicts, so a no-op save is detectable).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

ENGINES = ("vllm", "vllm-ascend", "sglang", "mindie")
BACKENDS = ("kthena", "deployments")
CONNECTORS = ("mooncake", "mooncake-store", "nixl", "lmcache", "llm-datadist", "none")
ROLES = ("prefill", "decode")
CACHE_DTYPES = ("float16", "bfloat16", "float32", "int8")

# Which KV connectors each engine can drive (the engine's own P/D support).
ENGINE_CONNECTORS: dict[str, tuple[str, ...]] = {
    "vllm": ("mooncake", "mooncake-store", "nixl", "lmcache", "none"),
    "vllm-ascend": ("mooncake", "mooncake-store", "llm-datadist", "none"),
    "sglang": ("mooncake", "mooncake-store", "nixl", "none"),
    "mindie": ("llm-datadist", "none"),
}

# Flags Tandem renders itself from the spec; setting them in extra_args would contradict it.
MANAGED_FLAGS = (
    "--kv-transfer-config",
    "--otlp-traces-endpoint",
    "--collect-detailed-traces",
    "--port",
    "--host",
    "--served-model-name",
    "--tensor-parallel-size",
    "--tp-size",
    "--data-parallel-size",
    "--disaggregation-mode",
    "--disaggregation-transfer-backend",
    "--disaggregation-bootstrap-port",
)

DEFAULT_PORT = 8000
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An env value "secret:<secret-name>/<key>" is rendered as a secretKeyRef: the spec, which every viewer
# reads and every revision keeps, never holds the credential itself.
SECRET_REF = re.compile(r"^secret:([a-z0-9]([-a-z0-9.]*[a-z0-9])?)/([-._a-zA-Z0-9]+)$")
# "..._PER_TOKEN" is a rate (e.g. SANDBOX_PREFILL_MS_PER_TOKEN), not a token.
CREDENTIAL_ENV = re.compile(
    r"(^|_)((?<!_PER_)TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)(_|$)",
    re.IGNORECASE,
)
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
RESOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
NAME_MAX = 40  # leaves room for the "-prefill" / "-router" / "-mooncake" suffixes within 63


class SpecError(ValueError):
    """A spec that fails validation; ``errors`` maps field paths to 'what is wrong; the fix' messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        first = next(iter(errors.items()))
        super().__init__(f"{first[0]}: {first[1][0]}")


@dataclass(frozen=True)
class CacheDesc:
    """LLM-DataDist ``CacheDesc``: must match the model's KV layout or pulls fail."""

    num_tensors: int
    shape: tuple[int, ...]
    dtype: str


# TENT's metrics server port: MetricsConfig.http_port's default (kvcache-ai/Mooncake
# mooncake-transfer-engine/tent/include/tent/metrics/config_loader.h).
TENT_METRICS_DEFAULT_PORT = 9100


@dataclass(frozen=True)
class ConnectorSpec:
    type: str
    kv_port: int = 20001
    bootstrap_port: int = 8998
    side_channel_port: int = 5600
    master_address: str = ""
    metadata_server: str = "P2PHANDSHAKE"
    protocol: str = "tcp"
    prefill_cluster_id: int = 0
    decode_cluster_id: int = 100
    link_port: int = 26000
    cache_desc: CacheDesc | None = None
    # Mooncake's transfer engine (TENT) serving its own /metrics (transport failovers, bytes per transport):
    # off unless asked for, so manifests written without it (Kthena's examples) import unchanged.
    transfer_metrics: bool = False
    transfer_metrics_port: int = TENT_METRICS_DEFAULT_PORT


@dataclass(frozen=True)
class RoleSpec:
    replicas: int
    accelerator_resource: str
    accelerator_count: int
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    node_selector: dict[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cpu: str = ""
    memory: str = ""
    # What the spec does not model (init containers, sidecars, volumes, probes, security context,
    # tolerations, affinity, annotations, ...), applied over the rendered pod template by every backend
    # (topologies/spec_overlay.py says what it may hold, render/overlay.py how it is applied).
    pod_overlay: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RoutingSpec:
    model_name: str
    timeout_seconds: int = 60
    retry_attempts: int = 2
    retry_interval_ms: int = 100
    router_image: str = ""  # plain backend only; empty: the engine's default router image
    # plain backend only: the router Service's type; LoadBalancer gives it an external address
    # (a cloud load balancer, MetalLB), which Tandem's gateway then finds as the serving endpoint
    service_type: str = "LoadBalancer"


@dataclass(frozen=True)
class SloSpec:
    # None: not set (an import cannot infer a target; the operator is asked, nothing is invented)
    ttft_ms: int | None = 1000
    tbt_ms: int | None = 50


TRACING_MODES = ("off", "on", "detailed")


@dataclass(frozen=True)
class TracingSpec:
    """Per-request traces from the engines (vLLM's --otlp-traces-endpoint) to Tandem's /v1/traces.

    on: each request's `llm_request` span; detailed: also vLLM's model and worker spans
    (--collect-detailed-traces all: costly). `endpoint` is Tandem's OTLP URL as the pods reach it;
    `headers_secret` the Secret (name/key) holding OTEL_EXPORTER_OTLP_TRACES_HEADERS, e.g.
    `Authorization=Bearer%20tdm_i_...` with a key of the telemetry purpose."""

    mode: str = "off"
    endpoint: str = ""
    headers_secret: str = ""


@dataclass(frozen=True)
class Bounds:
    min: int
    max: int


@dataclass(frozen=True)
class RebalancingSpec:
    prefill: Bounds | None  # None: not set (the planner moves nothing until the operator sets them)
    decode: Bounds | None
    accelerator_budget: int


@dataclass(frozen=True)
class TopologySpec:
    name: str
    namespace: str
    model_name: str
    model_source: str
    engine: str
    image: str
    backend: str
    port: int
    connector: ConnectorSpec
    prefill: RoleSpec
    decode: RoleSpec
    routing: RoutingSpec
    slo: SloSpec
    rebalancing: RebalancingSpec
    tracing: TracingSpec = TracingSpec()

    def role(self, name: str) -> RoleSpec:
        return self.prefill if name == "prefill" else self.decode

    def unanswered(self) -> list[str]:
        """Field paths left unset that the operator must answer (an import never invents them)."""
        out = [f"slo.{k}" for k in ("ttft_ms", "tbt_ms") if getattr(self.slo, k) is None]
        out += [f"rebalancing.{r}" for r in ROLES if getattr(self.rebalancing, r) is None]
        return out

    def accelerators_requested(self) -> int:
        return sum(r.replicas * r.accelerator_count for r in (self.prefill, self.decode))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["roles"] = {"prefill": data.pop("prefill"), "decode": data.pop("decode")}
        for role in data["roles"].values():
            role["extra_args"] = list(role["extra_args"])
        desc = data["connector"]["cache_desc"]
        if desc is not None:
            desc["shape"] = list(desc["shape"])
        return data

    @classmethod
    def from_dict(cls, data: Any) -> TopologySpec:
        from topologies.spec_parser import SpecParser

        return SpecParser(data).parse()
