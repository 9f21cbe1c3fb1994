"""Reading a raw spec dict into a ``TopologySpec``, collecting every problem with its field path:
the spec's sections (connector, roles, routing, SLO, rebalancing, tracing) and the checks across them,
read with the field readers of ``spec_fields``."""

from __future__ import annotations

import re
from typing import Any

from topologies.spec import (
    BACKENDS,
    CACHE_DTYPES,
    CONNECTORS,
    DEFAULT_PORT,
    DNS_LABEL,
    ENGINE_CONNECTORS,
    ENGINES,
    NAME_MAX,
    RESOURCE_NAME,
    TENT_METRICS_DEFAULT_PORT,
    TRACING_MODES,
    Bounds,
    CacheDesc,
    ConnectorSpec,
    RebalancingSpec,
    RoleSpec,
    RoutingSpec,
    SloSpec,
    SpecError,
    TopologySpec,
    TracingSpec,
)
from topologies.spec_fields import FieldReader
from topologies.spec_values import MODEL_NAME_MAX, MODEL_SOURCE_MAX, image_problem


class SpecParser(FieldReader):
    """Reads a raw spec dict section by section into a ``TopologySpec``; ``SpecError`` with every
    problem found when there are any."""

    def parse(self) -> TopologySpec:
        d = self.data
        name = self.text(d, "name", "name")
        if name and (not DNS_LABEL.match(name) or len(name) > NAME_MAX):
            self.err(
                "name",
                f"must be lower-case letters, digits and '-', at most {NAME_MAX} characters "
                "(e.g. deepseek-pd)",
            )
        namespace = self.text(d, "namespace", "namespace", "default")
        if not DNS_LABEL.match(namespace) or len(namespace) > 63:
            self.err("namespace", "must be a DNS label: lower-case letters, digits and '-', ≤63 characters")
        model_name = self.text(d, "model_name", "model_name", limit=MODEL_NAME_MAX)
        model_source = self.text(
            d, "model_source", "model_source", model_name or None, limit=MODEL_SOURCE_MAX
        )
        engine = self.choice(d, "engine", "engine", ENGINES)
        image = self.text(d, "image", "image", limit=None)
        if image:
            self.check("image", image_problem(image))
        backend = self.choice(d, "backend", "backend", BACKENDS, "kthena")
        port = self.integer(d, "port", "port", DEFAULT_PORT, lo=1, hi=65535)
        connector = self.parse_connector(self.section(d, "connector", "connector"), engine)
        roles = self.section(d, "roles", "roles")
        prefill = self.parse_role(self.section(roles, "prefill", "roles.prefill"), "roles.prefill")
        decode = self.parse_role(self.section(roles, "decode", "roles.decode"), "roles.decode")
        routing_raw = self.section(d, "routing", "routing")
        routing = RoutingSpec(
            model_name=self.text(
                routing_raw, "model_name", "routing.model_name", model_name or "model", limit=MODEL_NAME_MAX
            ),
            timeout_seconds=self.integer(
                routing_raw, "timeout_seconds", "routing.timeout_seconds", 60, lo=1, hi=3600
            ),
            retry_attempts=self.integer(
                routing_raw, "retry_attempts", "routing.retry_attempts", 2, lo=0, hi=10
            ),
            retry_interval_ms=self.integer(
                routing_raw, "retry_interval_ms", "routing.retry_interval_ms", 100, lo=1, hi=60000
            ),
            router_image=self.text(routing_raw, "router_image", "routing.router_image", "", limit=None),
            service_type=self.choice(
                routing_raw,
                "service_type",
                "routing.service_type",
                ("LoadBalancer", "ClusterIP"),
                "LoadBalancer",
            ),
        )
        if routing.router_image:
            self.check("routing.router_image", image_problem(routing.router_image))
        slo_raw = self.section(d, "slo", "slo")
        slo = SloSpec(
            ttft_ms=self.unset_or_integer(slo_raw, "ttft_ms", "slo.ttft_ms", 1000, lo=1, hi=600000),
            tbt_ms=self.unset_or_integer(slo_raw, "tbt_ms", "slo.tbt_ms", 50, lo=1, hi=60000),
        )
        rebalancing = self.parse_rebalancing(self.section(d, "rebalancing", "rebalancing"), prefill, decode)
        tracing = self.parse_tracing(self.section(d, "tracing", "tracing"))
        self.cross_checks(engine, backend, connector, prefill, decode)
        if self.errors:
            raise SpecError(self.errors)
        return TopologySpec(
            name=name,
            namespace=namespace,
            model_name=model_name,
            model_source=model_source,
            engine=engine,
            image=image,
            backend=backend,
            port=port,
            connector=connector,
            prefill=prefill,
            decode=decode,
            routing=routing,
            slo=slo,
            rebalancing=rebalancing,
            tracing=tracing,
        )

    def parse_tracing(self, raw: dict[str, Any]) -> TracingSpec:
        mode = self.choice(raw, "mode", "tracing.mode", TRACING_MODES, "off")
        endpoint = self.text(raw, "endpoint", "tracing.endpoint", "")
        secret = self.text(raw, "headers_secret", "tracing.headers_secret", "")
        if endpoint and not endpoint.startswith(("http://", "https://")):
            self.err("tracing.endpoint", "must be an http(s) URL, e.g. https://tandem.example.com/v1/traces")
        if mode != "off" and not endpoint:
            self.err(
                "tracing.endpoint",
                "is required when tracing is on: Tandem's OTLP URL as the pods reach it, "
                "e.g. https://tandem.example.com/v1/traces",
            )
        if secret and secret.count("/") != 1:
            self.err("tracing.headers_secret", "must be <secret-name>/<key>, e.g. tandem-traces/headers")
        return TracingSpec(mode=mode, endpoint=endpoint, headers_secret=secret)

    def parse_connector(self, c: dict[str, Any], engine: str) -> ConnectorSpec:
        kind = self.choice(c, "type", "connector.type", CONNECTORS)
        if engine in ENGINE_CONNECTORS and kind in CONNECTORS and kind not in ENGINE_CONNECTORS[engine]:
            self.err(
                "connector.type",
                f"{engine} cannot use the {kind} connector; choose one of: "
                f"{', '.join(ENGINE_CONNECTORS[engine])}",
            )
        master = self.text(c, "master_address", "connector.master_address", "")
        if kind == "mooncake-store":
            if not master:
                self.err(
                    "connector.master_address",
                    "is required for mooncake-store; set the Mooncake master "
                    "Service address, e.g. mooncake-master.<namespace>.svc:50051",
                )
            elif not re.match(r"^[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$", master):
                self.err(
                    "connector.master_address", "must be host:port, e.g. mooncake-master.default.svc:50051"
                )
        protocol = self.choice(c, "protocol", "connector.protocol", ("tcp", "rdma"), "tcp")
        desc: CacheDesc | None = None
        raw_desc = c.get("cache_desc")
        if raw_desc:
            desc = self.parse_cache_desc(raw_desc)
        elif kind == "llm-datadist":
            self.err(
                "connector.cache_desc",
                "is required for llm-datadist: give num_tensors, shape and dtype "
                "matching the model's KV cache (e.g. 2×layers tensors of [blocks, block_size, heads, dim])",
            )
        spec = ConnectorSpec(
            type=kind,
            kv_port=self.integer(c, "kv_port", "connector.kv_port", 20001, lo=1024, hi=65534),
            bootstrap_port=self.integer(
                c, "bootstrap_port", "connector.bootstrap_port", 8998, lo=1024, hi=65535
            ),
            side_channel_port=self.integer(
                c, "side_channel_port", "connector.side_channel_port", 5600, lo=1024, hi=65535
            ),
            master_address=master,
            metadata_server=self.text(c, "metadata_server", "connector.metadata_server", "P2PHANDSHAKE"),
            protocol=protocol,
            prefill_cluster_id=self.integer(
                c, "prefill_cluster_id", "connector.prefill_cluster_id", 0, lo=0, hi=2**31 - 1
            ),
            decode_cluster_id=self.integer(
                c, "decode_cluster_id", "connector.decode_cluster_id", 100, lo=0, hi=2**31 - 1
            ),
            link_port=self.integer(c, "link_port", "connector.link_port", 26000, lo=1024, hi=65535),
            cache_desc=desc,
            transfer_metrics=self.boolean(c, "transfer_metrics", "connector.transfer_metrics", False),
            transfer_metrics_port=self.integer(
                c,
                "transfer_metrics_port",
                "connector.transfer_metrics_port",
                TENT_METRICS_DEFAULT_PORT,
                lo=1024,
                hi=65535,
            ),
        )
        if spec.transfer_metrics and (kind != "mooncake" or engine == "mindie"):
            self.err(
                "connector.transfer_metrics",
                "only Mooncake's transfer engine serves these metrics (connector mooncake on vllm, "
                "vllm-ascend or sglang): turn it off",
            )
        if kind == "llm-datadist" and spec.prefill_cluster_id == spec.decode_cluster_id:
            self.err(
                "connector.decode_cluster_id",
                "must differ from prefill_cluster_id "
                f"({spec.prefill_cluster_id}); LLM-DataDist links clusters by id",
            )
        return spec

    def parse_cache_desc(self, raw: Any) -> CacheDesc | None:
        if not isinstance(raw, dict):
            self.err("connector.cache_desc", "must be an object with num_tensors, shape, dtype")
            return None
        num = self.integer(raw, "num_tensors", "connector.cache_desc.num_tensors", lo=1, hi=100000)
        shape = self.sizes(raw, "shape", "connector.cache_desc.shape")
        dtype = self.choice(raw, "dtype", "connector.cache_desc.dtype", CACHE_DTYPES)
        return CacheDesc(num_tensors=num, shape=tuple(shape), dtype=dtype)

    def parse_role(self, r: dict[str, Any], path: str) -> RoleSpec:
        resource = self.text(r, "accelerator_resource", f"{path}.accelerator_resource")
        if resource and not RESOURCE_NAME.match(resource):
            self.err(
                f"{path}.accelerator_resource",
                "must be an extended resource name such as nvidia.com/gpu or huawei.com/Ascend910",
            )
        args = self.arguments(r, "extra_args", f"{path}.extra_args")
        tp = self.integer(r, "tensor_parallel_size", f"{path}.tensor_parallel_size", 1, lo=1, hi=64)
        dp = self.integer(r, "data_parallel_size", f"{path}.data_parallel_size", 1, lo=1, hi=64)
        count = self.integer(r, "accelerator_count", f"{path}.accelerator_count", lo=0, hi=64)
        if count < tp * dp:
            need = tp * dp
            shape = (
                f"tensor_parallel_size ({tp})"
                if dp == 1
                else f"tensor_parallel_size × data_parallel_size ({need})"
            )
            self.err(
                f"{path}.accelerator_count",
                f"must be ≥ {shape}; set it to {need} or lower --tensor-parallel-size",
            )
        return RoleSpec(
            replicas=self.integer(r, "replicas", f"{path}.replicas", 1, lo=0, hi=256),
            accelerator_resource=resource,
            accelerator_count=count,
            tensor_parallel_size=tp,
            data_parallel_size=dp,
            node_selector=self.str_map(r, "node_selector", f"{path}.node_selector", env=False),
            extra_args=args,
            env=self.str_map(r, "env", f"{path}.env", env=True),
            cpu=self.quantity(r, "cpu", f"{path}.cpu", what="CPU", example='"8" or "500m"'),
            memory=self.quantity(r, "memory", f"{path}.memory", what="memory", example='"64Gi"'),
            pod_overlay=self.overlay(r, "pod_overlay", f"{path}.pod_overlay"),
        )

    def parse_rebalancing(self, raw: dict[str, Any], prefill: RoleSpec, decode: RoleSpec) -> RebalancingSpec:
        bounds: dict[str, Bounds | None] = {}
        for role_name, role in (("prefill", prefill), ("decode", decode)):
            path = f"rebalancing.{role_name}"
            given = raw.get(role_name)
            unset = isinstance(given, dict) and given.get("min") is None and given.get("max") is None
            if role_name in raw and (given is None or (unset and "min" in given)):
                bounds[role_name] = None  # not set: asked for, never invented
                continue
            src = self.section(raw, role_name, path)
            lo = self.integer(src, "min", f"{path}.min", min(role.replicas, 1), lo=0, hi=256)
            hi = self.integer(src, "max", f"{path}.max", max(role.replicas, lo), lo=0, hi=256)
            if hi < lo:
                self.err(f"{path}.max", f"must be ≥ min ({lo})")
            if not lo <= role.replicas <= hi:
                self.err(
                    f"roles.{role_name}.replicas",
                    f"must lie within the rebalancing bounds {lo}..{hi}; "
                    f"change replicas or rebalancing.{role_name}.min/max",
                )
            bounds[role_name] = Bounds(min=lo, max=hi)
        requested = prefill.replicas * prefill.accelerator_count + decode.replicas * decode.accelerator_count
        budget = self.integer(
            raw, "accelerator_budget", "rebalancing.accelerator_budget", requested, lo=0, hi=100000
        )
        if budget < requested:
            self.err(
                "rebalancing.accelerator_budget",
                f"must be ≥ the {requested} accelerators the roles request "
                "(replicas × accelerator_count); raise the budget or lower replicas",
            )
        return RebalancingSpec(prefill=bounds["prefill"], decode=bounds["decode"], accelerator_budget=budget)

    def cross_checks(
        self, engine: str, backend: str, connector: ConnectorSpec, prefill: RoleSpec, decode: RoleSpec
    ) -> None:
        if connector.type == "none" and prefill.replicas > 0:
            self.err(
                "roles.prefill.replicas",
                "must be 0 without a KV connector (aggregated serving: decode "
                "instances do prefill themselves); choose a connector or set prefill replicas to 0",
            )
        if connector.type != "none" and decode.replicas == 0 and prefill.replicas > 0:
            self.err("roles.decode.replicas", "must be ≥ 1: prefill instances hand their KV cache to decode")
        if engine == "vllm-ascend":
            for name, role in (("prefill", prefill), ("decode", decode)):
                if role.accelerator_resource.startswith("nvidia.com/"):
                    self.err(
                        f"roles.{name}.accelerator_resource",
                        "vllm-ascend runs on Ascend NPUs; use the "
                        "huawei.com/... resource your nodes offer, or engine vllm for NVIDIA GPUs",
                    )
        if engine == "mindie" and backend == "kthena" and connector.type not in ("llm-datadist", "none"):
            self.err("connector.type", "MindIE moves KV with llm-datadist; choose llm-datadist")
