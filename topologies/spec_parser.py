"""Reading a raw spec dict into a ``TopologySpec``, collecting every problem with its field path."""

from __future__ import annotations

import re
from typing import Any

from topologies.spec import (
    BACKENDS,
    CACHE_DTYPES,
    CONNECTORS,
    CREDENTIAL_ENV,
    DEFAULT_PORT,
    DNS_LABEL,
    ENGINE_CONNECTORS,
    ENGINES,
    ENV_NAME,
    LABEL_KEY,
    LABEL_VALUE,
    MANAGED_FLAGS,
    NAME_MAX,
    RESOURCE_NAME,
    SECRET_REF,
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
from topologies.spec_overlay import check as overlay_check
from topologies.spec_values import (
    MODEL_NAME_MAX,
    MODEL_SOURCE_MAX,
    TEXT_MAX,
    ascii_int,
    image_problem,
    quantity_problem,
    text_problem,
)


class SpecParser:
    """Reads a raw dict field by field, collecting every problem instead of stopping at the first."""

    def __init__(self, data: Any) -> None:
        self.data = data if isinstance(data, dict) else {}
        self.errors: dict[str, list[str]] = {}
        if not isinstance(data, dict):
            self.err("spec", "must be an object with name, namespace, engine, connector, roles, ...")

    def err(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def section(self, parent: dict[str, Any], key: str, path: str) -> dict[str, Any]:
        value = parent.get(key, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.err(path, "must be an object")
            return {}
        return value

    def text(
        self,
        src: dict[str, Any],
        key: str,
        path: str,
        default: str | None = None,
        *,
        limit: int | None = TEXT_MAX,
    ) -> str:
        """A trimmed string without control or invisible characters, at most ``limit`` characters
        (None: the caller checks the length with a message of its own)."""
        value = src.get(key, default)
        if value is None or (isinstance(value, str) and not value.strip()):
            if default is not None:
                return default
            self.err(path, "is required")
            return ""
        if not isinstance(value, str):
            self.err(path, "must be a string")
            return ""
        value = value.strip()
        problem = text_problem(value, limit=limit or len(value), example="a shorter value")
        if problem:
            self.err(path, problem)
            return ""
        return value

    def integer(
        self, src: dict[str, Any], key: str, path: str, default: int | None = None, *, lo: int, hi: int
    ) -> int:
        value = src.get(key, default)
        if value is None or value == "":
            if default is not None:
                return default
            self.err(path, "is required")
            return lo
        number = ascii_int(value)
        if number is None:
            self.err(path, f"must be a whole number between {lo} and {hi}, written with the digits 0-9")
            return lo
        value = number
        if not lo <= value <= hi:
            self.err(path, f"must be between {lo} and {hi} (got {value})")
            return max(lo, min(hi, value))
        return value

    def boolean(self, src: dict[str, Any], key: str, path: str, default: bool) -> bool:
        value = src.get(key, default)
        if value is None or value == "":
            return default
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"  # the editor's text
        if not isinstance(value, bool):
            self.err(path, "must be true or false")
            return default
        return value

    def check(self, path: str, problem: str | None) -> None:
        if problem:
            self.err(path, problem)

    def quantity(self, src: dict[str, Any], key: str, path: str, *, what: str, example: str) -> str:
        """A Kubernetes quantity; numbers are taken as written (8 → "8")."""
        raw = src.get(key)
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            raw = str(raw)
            src = {key: raw}
        value = self.text(src, key, path, "")
        if value:
            problem = quantity_problem(value, what=what, example=example)
            if problem:
                self.err(path, problem)
                return ""
        return value

    def choice(
        self, src: dict[str, Any], key: str, path: str, options: tuple[str, ...], default: str = ""
    ) -> str:
        value = self.text(src, key, path, default or None)
        if value and value not in options:
            self.err(path, f"unknown value {value!r}; choose one of: {', '.join(options)}")
        return value

    def str_map(self, src: dict[str, Any], key: str, path: str, *, env: bool) -> dict[str, str]:
        value = src.get(key) or {}
        if not isinstance(value, dict):
            self.err(path, "must be an object of name → value strings")
            return {}
        out: dict[str, str] = {}
        for k, v in value.items():
            k = str(k).strip()
            if env and not ENV_NAME.match(k):
                self.err(f"{path}.{k}", "is not a valid environment variable name; use letters, digits, _")
                continue
            if not env and not LABEL_KEY.match(k):
                self.err(
                    f"{path}.{k}", "is not a valid node label key (e.g. node.kubernetes.io/instance-type)"
                )
                continue
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                self.err(f"{path}.{k}", "must be a string")
                continue
            # Env values may span lines (\n, \t); nothing else hidden, and nothing huge.
            problem = text_problem(
                str(v).replace("\n", " ").replace("\t", " "), limit=TEXT_MAX, example="a shorter value"
            )
            if problem:
                self.err(f"{path}.{k}", problem)
                continue
            if env and str(v).startswith("secret:") and not SECRET_REF.match(str(v)):
                self.err(
                    f"{path}.{k}", "a secret reference reads secret:<secret-name>/<key>, e.g. secret:hf/token"
                )
                continue
            if env and CREDENTIAL_ENV.search(k) and not SECRET_REF.match(str(v)):
                self.err(
                    f"{path}.{k}",
                    "looks like a credential, and the spec is shown to every viewer and kept in every "
                    "revision; put it in a Kubernetes Secret in the topology's namespace and write "
                    "secret:<secret-name>/<key>",
                )
                continue
            if not env and not LABEL_VALUE.match(str(v)):
                self.err(f"{path}.{k}", "is not a valid label value (≤63 of letters, digits, -_.)")
                continue
            out[k] = str(v)
        return dict(sorted(out.items()))

    def sizes(self, src: dict[str, Any], key: str, path: str) -> list[int]:
        """A non-empty list of positive whole numbers (a string "2048, 128" is split)."""
        raw = src.get(key)
        if isinstance(raw, str):
            raw = [s for s in re.split(r"[,\s×x]+", raw.strip("[]() ")) if s]
        shape: list[int] = []
        if not isinstance(raw, list) or not raw:
            self.err(path, "is required: a list of positive sizes, e.g. [2048, 128, 1, 576]")
            return shape
        for item in raw:
            size = ascii_int(item) or 0
            if size <= 0:
                self.err(
                    path, f"{item!r} is not a positive size; use whole numbers, e.g. [2048, 128, 1, 576]"
                )
                break
            shape.append(size)
        return shape

    def arguments(self, src: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
        """Extra command-line arguments (a string is split on spaces); flags Tandem sets are refused."""
        raw = src.get(key) or []
        if isinstance(raw, str):
            raw = raw.split()
        args: list[str] = []
        if not isinstance(raw, list):
            self.err(path, "must be a list of command-line arguments")
            return ()
        for arg in raw:
            if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
                self.err(path, f"{arg!r:.40} is not a command-line argument; use strings")
                continue
            arg = str(arg)
            problem = text_problem(arg, limit=TEXT_MAX, example="--max-model-len=8192")
            if problem:
                self.err(path, f"{arg[:40]!r}: {problem}")
                continue
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS:
                self.err(
                    path,
                    f"{flag} is set by Tandem from the spec; remove it and set "
                    "the matching field (port, tensor_parallel_size, connector, ...) instead",
                )
            args.append(arg)
        return tuple(args)

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

    def unset_or_integer(
        self, src: dict[str, Any], key: str, path: str, default: int, *, lo: int, hi: int
    ) -> int | None:
        """An integer, or None when the key is given as null: not set yet (an import never invents it)."""
        if key in src and src[key] is None:
            return None
        return self.integer(src, key, path, default, lo=lo, hi=hi)

    def overlay(self, src: dict[str, Any], key: str, path: str) -> dict[str, Any]:
        """The role's pod-template overlay (spec_overlay), normalised to plain JSON."""
        value, errors = overlay_check(src.get(key), path)
        for where, messages in errors.items():
            for message in messages:
                self.err(where, message)
        return value

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
