"""A valid spec for every backend × connector × engine combination the spec accepts (test helper)."""

from __future__ import annotations

from typing import Any

from topologies.presets import preset_spec
from topologies.spec import BACKENDS, ENGINE_CONNECTORS

IMAGES = {
    "vllm": "docker.io/vllm/vllm-openai:v0.8.5",
    "vllm-ascend": "quay.io/ascend/vllm-ascend:v0.9.1",
    "sglang": "docker.io/lmsysorg/sglang:latest",
    "mindie": "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.0.RC1-800I-A2-py311",
}
ASCEND_ENGINES = ("vllm-ascend", "mindie")
CONNECTOR_FIELDS: dict[str, dict[str, Any]] = {
    "mooncake-store": {"master_address": "10.255.0.9:50051"},
    "llm-datadist": {
        "prefill_cluster_id": 1,
        "decode_cluster_id": 2,
        "cache_desc": {"num_tensors": 54, "shape": [2048, 128, 1, 576], "dtype": "bfloat16"},
    },
}


def combination(engine: str, connector: str, backend: str, **overrides: Any) -> dict[str, Any]:
    """The spec dict of one combination, from the Ascend or GPU seed preset."""
    preset = "deepseek-ascend-mooncake" if engine in ASCEND_ENGINES else "qwen-gpu-nixl"
    base = preset_spec(preset)
    resource = base["roles"]["decode"]["accelerator_resource"]
    spec: dict[str, Any] = {
        "engine": engine,
        "backend": backend,
        "image": IMAGES[engine],
        "connector": {"type": connector, **CONNECTOR_FIELDS.get(connector, {})},
    }
    if connector == "none":  # aggregated serving: decode instances prefill themselves
        spec["roles"] = {
            "prefill": {"replicas": 0, "accelerator_resource": resource, "accelerator_count": 1},
            "decode": {"replicas": 1, "accelerator_resource": resource, "accelerator_count": 1},
        }
        spec["rebalancing"] = {
            "prefill": {"min": 0, "max": 0},
            "decode": {"min": 1, "max": 2},
            "accelerator_budget": 4,
        }
    spec.update(overrides)
    return preset_spec(preset, **spec)


def all_combinations() -> list[tuple[str, str, str]]:
    """(engine, connector, backend) for every connector each engine drives, on both backends."""
    return [
        (engine, connector, backend)
        for engine, connectors in ENGINE_CONNECTORS.items()
        for connector in connectors
        for backend in BACKENDS
    ]
