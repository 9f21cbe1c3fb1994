"""Ready-made specs for the three seed scenarios, used by the editor and by the demo."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Preset:
    key: str
    title: str
    summary: str
    spec: dict[str, Any]

    def as_spec(self, **overrides: Any) -> dict[str, Any]:
        data = copy.deepcopy(self.spec)
        data.update(overrides)
        return data


# Coding assistants send tools with every request. vLLM refuses a request with tools (and no
# tool_choice, or "auto") unless its engines run with a tool parser and auto tool choice, on prefill
# too (a P/D proxy sends the prefill the same request). The parser is the model family's own: DeepSeek
# V2.5/V3's tool-call tokens, Qwen3's Hermes-style <tool_call> blocks (SGLang's name for it: qwen25).
DEEPSEEK_TOOLS = ("--enable-auto-tool-choice", "--tool-call-parser", "deepseek_v3")
QWEN_TOOLS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")

ASCEND_MOONCAKE = Preset(
    key="deepseek-ascend-mooncake",
    title="DeepSeek-V2-Lite on Ascend 910 · vLLM-Ascend + Mooncake",
    summary="1 prefill + 1 decode, TP 2 on 4 NPUs each; KV moves over the Mooncake transfer engine "
    "(MooncakeConnectorV1, NPU buffers), as in Kthena's Ascend example.",
    spec={
        "name": "deepseek-v2-lite",
        "namespace": "dev",
        "model_name": "deepseek-ai/DeepSeekV2",
        "model_source": "/mnt/cache/deepseek-ai/DeepSeek-V2-Lite/",
        "engine": "vllm-ascend",
        "image": "ghcr.io/volcano-sh/kthena-engine:vllm-ascend_v0.10.1rc1_mooncake_v0.3.5",
        "backend": "kthena",
        "port": 8000,
        "connector": {"type": "mooncake", "kv_port": 20001},
        "roles": {
            "prefill": {
                "replicas": 1,
                "accelerator_resource": "huawei.com/ascend-1980",
                "accelerator_count": 4,
                "tensor_parallel_size": 2,
                "data_parallel_size": 2,
                "cpu": "8",
                "memory": "64Gi",
                "extra_args": [
                    "--gpu-memory-utilization",
                    "0.8",
                    "--max-model-len",
                    "32768",
                    "--max-num-batched-tokens",
                    "8192",
                    "--trust-remote-code",
                    "--enforce-eager",
                    *DEEPSEEK_TOOLS,
                ],
                "env": {"HF_HUB_OFFLINE": "1"},
            },
            "decode": {
                "replicas": 1,
                "accelerator_resource": "huawei.com/ascend-1980",
                "accelerator_count": 4,
                "tensor_parallel_size": 2,
                "data_parallel_size": 2,
                "cpu": "8",
                "memory": "64Gi",
                "extra_args": [
                    "--gpu-memory-utilization",
                    "0.8",
                    "--max-model-len",
                    "32768",
                    "--max-num-batched-tokens",
                    "16384",
                    "--trust-remote-code",
                    "--no-enable-prefix-caching",
                    "--enforce-eager",
                    *DEEPSEEK_TOOLS,
                ],
                "env": {"HF_HUB_OFFLINE": "1"},
            },
        },
        "routing": {
            "model_name": "deepseek-ai/DeepSeekV2",
            "timeout_seconds": 300,
            "retry_attempts": 3,
            "retry_interval_ms": 150,
        },
        "slo": {"ttft_ms": 2000, "tbt_ms": 80},
        "rebalancing": {
            "prefill": {"min": 1, "max": 3},
            "decode": {"min": 1, "max": 3},
            "accelerator_budget": 16,
        },
    },
)

GPU_NIXL = Preset(
    key="qwen-gpu-nixl",
    title="Qwen3-0.6B on NVIDIA GPUs · vLLM + NIXL",
    summary="1 prefill + 1 decode on one GPU each; KV moves over NIXL (UCX), as in Kthena's GPU example.",
    spec={
        "name": "qwen3-nixl",
        "namespace": "default",
        "model_name": "Qwen/Qwen3-0.6B",
        "model_source": "Qwen/Qwen3-0.6B",
        "engine": "vllm",
        "image": "ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2",
        "backend": "kthena",
        "port": 8000,
        "connector": {"type": "nixl", "side_channel_port": 5558},
        "roles": {
            "prefill": {
                "replicas": 1,
                "accelerator_resource": "nvidia.com/gpu",
                "accelerator_count": 1,
                "extra_args": [*QWEN_TOOLS],
                "env": {"PYTHONHASHSEED": "1047", "UCX_TLS": "^gga"},
            },
            "decode": {
                "replicas": 1,
                "accelerator_resource": "nvidia.com/gpu",
                "accelerator_count": 1,
                "extra_args": [*QWEN_TOOLS],
                "env": {"PYTHONHASHSEED": "1047", "UCX_TLS": "^gga"},
            },
        },
        "routing": {
            "model_name": "Qwen/Qwen3-0.6B",
            "timeout_seconds": 60,
            "retry_attempts": 2,
            "retry_interval_ms": 100,
        },
        "slo": {"ttft_ms": 500, "tbt_ms": 30},
        "rebalancing": {
            "prefill": {"min": 1, "max": 3},
            "decode": {"min": 1, "max": 3},
            "accelerator_budget": 4,
        },
    },
)

SGLANG_MOONCAKE = Preset(
    key="qwen-sglang-mooncake",
    title="Qwen3-0.6B on NVIDIA GPUs · SGLang + Mooncake",
    summary="1 prefill + 1 decode; SGLang's --disaggregation-mode with the Mooncake transfer backend "
    "and a bootstrap port on prefill, as in Kthena's SGLang example.",
    spec={
        "name": "qwen3-sglang",
        "namespace": "default",
        "model_name": "Qwen/Qwen3-0.6B",
        "model_source": "Qwen/Qwen3-0.6B",
        "engine": "sglang",
        "image": "docker.io/lmsysorg/sglang:latest",
        "backend": "kthena",
        "port": 30000,
        "connector": {"type": "mooncake", "bootstrap_port": 8998},
        "roles": {
            "prefill": {
                "replicas": 1,
                "accelerator_resource": "nvidia.com/gpu",
                "accelerator_count": 1,
                "cpu": "4",
                "memory": "12Gi",
                "extra_args": ["--tool-call-parser", "qwen25"],
            },
            "decode": {
                "replicas": 1,
                "accelerator_resource": "nvidia.com/gpu",
                "accelerator_count": 1,
                "cpu": "4",
                "memory": "12Gi",
                "extra_args": ["--tool-call-parser", "qwen25"],
            },
        },
        "routing": {
            "model_name": "Qwen/Qwen3-0.6B",
            "timeout_seconds": 60,
            "retry_attempts": 2,
            "retry_interval_ms": 100,
        },
        "slo": {"ttft_ms": 500, "tbt_ms": 30},
        "rebalancing": {
            "prefill": {"min": 1, "max": 3},
            "decode": {"min": 1, "max": 3},
            "accelerator_budget": 4,
        },
    },
)

PRESETS: dict[str, Preset] = {p.key: p for p in (ASCEND_MOONCAKE, GPU_NIXL, SGLANG_MOONCAKE)}


def preset_spec(key: str, **overrides: Any) -> dict[str, Any]:
    """A fresh copy of a preset's spec dict (raises KeyError for an unknown key)."""
    return PRESETS[key].as_spec(**overrides)
