"""The topology editor's fields: one per spec path, with help that explains it (``forms`` reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from topologies.spec import BACKENDS, CACHE_DTYPES, CONNECTORS, ENGINES


@dataclass(frozen=True)
class EditorField:
    path: str
    label: str
    help: str
    kind: str = "text"  # text | int | choice | args | map | shape | yaml
    choices: tuple[str, ...] = ()
    show_for: tuple[str, ...] = ()  # connector types this field matters for (empty: always)
    placeholder: str = ""
    # An empty field is "not set" (null), not the default: values an import leaves for the operator
    nullable: bool = False

    @property
    def html_id(self) -> str:
        return "f-" + self.path.replace(".", "-")


def _role_fields(role: str) -> list[EditorField]:
    what = "prompt processing (compute-bound)" if role == "prefill" else "token generation (memory-bound)"
    p = f"roles.{role}"
    return [
        EditorField(f"{p}.replicas", "Replicas", f"How many {role} instances run {what}.", "int"),
        EditorField(
            f"{p}.accelerator_resource",
            "Accelerator resource",
            "The extended resource your nodes advertise, exactly as on the node "
            "(kubectl describe node): nvidia.com/gpu, huawei.com/Ascend910, huawei.com/ascend-1980.",
            placeholder="nvidia.com/gpu",
        ),
        EditorField(
            f"{p}.accelerator_count",
            "Accelerators per pod",
            "Devices each instance reserves; at least tensor × data parallel size, all on one node.",
            "int",
        ),
        EditorField(
            f"{p}.tensor_parallel_size",
            "Tensor-parallel size",
            "Devices one model replica is split across (--tensor-parallel-size).",
            "int",
        ),
        EditorField(
            f"{p}.data_parallel_size",
            "Data-parallel size",
            "Model replicas inside one pod (--data-parallel-size); usually 1.",
            "int",
        ),
        EditorField(
            f"{p}.cpu", "CPU", "CPU request and limit, e.g. 8 (leave empty for none).", placeholder="8"
        ),
        EditorField(
            f"{p}.memory",
            "Memory",
            "Memory request and limit, e.g. 64Gi (leave empty for none).",
            placeholder="64Gi",
        ),
        EditorField(
            f"{p}.node_selector",
            "Node selector",
            "One label per line, key=value; the pods only land on nodes with all of them.",
            "map",
            placeholder="node.kubernetes.io/instance-type=a3",
        ),
        EditorField(
            f"{p}.extra_args",
            "Extra engine arguments",
            "Appended to the engine command line (quotes as in a shell). Tandem sets --port, "
            "--served-model-name, --tensor-parallel-size and the KV-transfer flags itself.",
            "args",
            placeholder="--max-model-len 8192 --enforce-eager",
        ),
        EditorField(
            f"{p}.env",
            "Environment",
            "One variable per line, NAME=value. Credentials come from a Kubernetes Secret in the "
            "namespace: HF_TOKEN=secret:<secret-name>/<key>.",
            "map",
            placeholder="HF_HUB_OFFLINE=1",
        ),
        EditorField(
            f"{p}.pod_overlay",
            "Pod-template overlay",
            "What the spec does not model, applied over every rendered pod of this role (YAML): "
            "metadata (labels, annotations), spec (initContainers, sidecar containers, volumes, tolerations, "
            "affinity, securityContext, ...) and engine (the engine container's volumeMounts, probes, "
            "securityContext, env entries such as fieldRef, name, imagePullPolicy). An import keeps here "
            "what its YAML had beyond the fields above; empty: none.",
            "yaml",
            placeholder="spec:\n  tolerations:\n  - {key: huawei.com/Ascend910, operator: Exists}",
        ),
    ]


SECTIONS: list[tuple[str, str, list[EditorField]]] = [
    (
        "Where and what",
        "The cluster objects are named after the topology and live in its namespace.",
        [
            EditorField(
                "name",
                "Name",
                "Lower-case letters, digits and '-'; names the Kubernetes objects. Fixed once created.",
                placeholder="deepseek-pd",
            ),
            EditorField(
                "namespace",
                "Namespace",
                "Kubernetes namespace; created on deploy if missing. Fixed once created.",
                placeholder="default",
            ),
            EditorField(
                "model_name",
                "Served model name",
                "The model name clients send in requests (--served-model-name).",
                placeholder="Qwen/Qwen3-0.6B",
            ),
            EditorField(
                "model_source",
                "Model source",
                "Where the engine loads weights: a Hugging Face id or a "
                "path inside the pod. Defaults to the served model name.",
                placeholder="/models/Qwen3-0.6B",
            ),
        ],
    ),
    (
        "Engine",
        "The inference engine runs both roles; the backend decides which Kubernetes objects run it.",
        [
            EditorField(
                "engine",
                "Engine",
                "vllm (NVIDIA), vllm-ascend (Ascend NPU), sglang, or mindie (Ascend).",
                "choice",
                ENGINES,
            ),
            EditorField(
                "image",
                "Image",
                "Container image with the engine and its KV connector built in.",
                placeholder="vllm/vllm-openai:v0.10.0",
            ),
            EditorField(
                "backend",
                "Backend",
                "kthena renders ModelServing/ModelServer/ModelRoute (needs Kthena "
                "installed); deployments renders plain Deployments, Services and a router.",
                "choice",
                BACKENDS,
            ),
            EditorField("port", "Engine HTTP port", "OpenAI API and /metrics port of every instance.", "int"),
        ],
    ),
    (
        "KV connector",
        "How the KV cache moves from prefill to decode instances.",
        [
            EditorField(
                "connector.type",
                "Connector",
                "mooncake (transfer engine), mooncake-store (shared KV pool: "
                "needs a Mooncake master), nixl, lmcache, llm-datadist (Ascend CANN), or none (aggregated, "
                "no prefill role).",
                "choice",
                CONNECTORS,
            ),
            EditorField(
                "connector.kv_port",
                "KV port",
                "Transfer port of prefill instances (decode uses the next "
                "one), as kv_port in --kv-transfer-config.",
                "int",
                show_for=("mooncake", "llm-datadist", "lmcache"),
            ),
            EditorField(
                "connector.bootstrap_port",
                "Bootstrap port",
                "Where decode instances find prefill's KV "
                "(SGLang --disaggregation-bootstrap-port, VLLM_MOONCAKE_BOOTSTRAP_PORT).",
                "int",
                show_for=("mooncake", "mooncake-store"),
            ),
            EditorField(
                "connector.transfer_metrics",
                "Transfer-engine metrics",
                "Turn on Mooncake's transfer engine (TENT) metrics server (TENT_METRICS_ENABLED) and declare "
                "its port as tent-metrics: telemetry then names KV transfers falling back from RDMA to TCP.",
                "choice",
                choices=("false", "true"),
                show_for=("mooncake",),
            ),
            EditorField(
                "connector.transfer_metrics_port",
                "Transfer-engine metrics port",
                "Where TENT serves /metrics (TENT_METRICS_HTTP_PORT; default 9100); must not clash with "
                "another port of the engine container.",
                "int",
                show_for=("mooncake",),
            ),
            EditorField(
                "connector.side_channel_port",
                "NIXL side-channel port",
                "VLLM_NIXL_SIDE_CHANNEL_PORT: NIXL's handshake port.",
                "int",
                show_for=("nixl",),
            ),
            EditorField(
                "connector.master_address",
                "Mooncake master address",
                "The Mooncake master Service, host:port; preflight checks it exists.",
                show_for=("mooncake-store",),
                placeholder="mooncake-master.default.svc:50051",
            ),
            EditorField(
                "connector.protocol",
                "Transfer protocol",
                "tcp everywhere; rdma with RoCE/InfiniBand NICs.",
                "choice",
                ("tcp", "rdma"),
                show_for=("mooncake-store",),
            ),
            EditorField(
                "connector.prefill_cluster_id",
                "Prefill cluster id",
                "LLM-DataDist cluster id of the prefill (PROMPT) side.",
                "int",
                show_for=("llm-datadist",),
            ),
            EditorField(
                "connector.decode_cluster_id",
                "Decode cluster id",
                "LLM-DataDist cluster id of the decode (DECODER) side; must differ from prefill's.",
                "int",
                show_for=("llm-datadist",),
            ),
            EditorField(
                "connector.link_port",
                "Link port",
                "Port decode uses to link_clusters with prefill.",
                "int",
                show_for=("llm-datadist",),
            ),
            EditorField(
                "connector.cache_desc.num_tensors",
                "CacheDesc tensors",
                "Number of KV tensors (typically 2 × layers); must match the model.",
                "int",
                show_for=("llm-datadist",),
            ),
            EditorField(
                "connector.cache_desc.shape",
                "CacheDesc shape",
                "Shape of one KV tensor, comma-separated.",
                "shape",
                show_for=("llm-datadist",),
                placeholder="2048, 128, 1, 576",
            ),
            EditorField(
                "connector.cache_desc.dtype",
                "CacheDesc dtype",
                "Element type of the KV cache.",
                "choice",
                CACHE_DTYPES,
                show_for=("llm-datadist",),
            ),
        ],
    ),
    (
        "Prefill role",
        "Instances that process prompts and hand their KV cache to decode.",
        _role_fields("prefill"),
    ),
    ("Decode role", "Instances that generate tokens from the transferred KV cache.", _role_fields("decode")),
    (
        "Routing",
        "How the router sends requests to the P/D pairs.",
        [
            EditorField(
                "routing.model_name",
                "Route model name",
                "Model name the route matches; defaults to the served model name.",
            ),
            EditorField(
                "routing.timeout_seconds",
                "Timeout (s)",
                "How long the router waits for response headers.",
                "int",
            ),
            EditorField("routing.retry_attempts", "Retry attempts", "Retries of a failed request.", "int"),
            EditorField("routing.retry_interval_ms", "Retry interval (ms)", "Pause between retries.", "int"),
            EditorField(
                "routing.service_type",
                "Router Service type",
                "Plain backend only: LoadBalancer gives the router an external address (a cloud load "
                "balancer or MetalLB) that the gateway finds and uses; ClusterIP keeps it inside the cluster "
                "(then enter the serving endpoint, e.g. an Ingress, in the gateway settings).",
                "choice",
                ("LoadBalancer", "ClusterIP"),
            ),
            EditorField(
                "routing.router_image",
                "Router image",
                "Plain backend only: the P/D router's image. Empty "
                "uses the engine's default (vLLM production-stack router, or SGLang's model gateway).",
            ),
        ],
    ),
    (
        "SLO and rebalancing",
        "Targets and bounds that rebalancing works within.",
        [
            EditorField(
                "slo.ttft_ms",
                "TTFT target (ms)",
                "Time to first token the topology should meet (p95). Empty: not set; SLO alerts and the "
                "planner wait for it.",
                "int",
                placeholder="not set: e.g. 1000",
                nullable=True,
            ),
            EditorField(
                "slo.tbt_ms",
                "TBT target (ms)",
                "Time between tokens it should meet (p95). Empty: not set.",
                "int",
                placeholder="not set: e.g. 50",
                nullable=True,
            ),
            EditorField(
                "rebalancing.prefill.min",
                "Prefill min",
                "Fewest prefill replicas rebalancing may leave. Min and max empty: not set (the planner "
                "moves nothing).",
                "int",
                placeholder="not set",
                nullable=True,
            ),
            EditorField(
                "rebalancing.prefill.max",
                "Prefill max",
                "Most prefill replicas.",
                "int",
                placeholder="not set",
                nullable=True,
            ),
            EditorField(
                "rebalancing.decode.min",
                "Decode min",
                "Fewest decode replicas.",
                "int",
                placeholder="not set",
                nullable=True,
            ),
            EditorField(
                "rebalancing.decode.max",
                "Decode max",
                "Most decode replicas.",
                "int",
                placeholder="not set",
                nullable=True,
            ),
            EditorField(
                "rebalancing.accelerator_budget",
                "Accelerator budget",
                "Most accelerators the topology may hold in total; at least replicas × accelerators per pod.",
                "int",
            ),
        ],
    ),
]
