"""The performance model's parameters: engine arguments first, then `SANDBOX_*` env on the pod, then the
sandbox process's env, then defaults shaped like a small model on one accelerator.

| env | default | meaning |
|---|---|---|
| `SANDBOX_TIME_SCALE` | 1.0 | multiplies every simulated duration (0.1 = ten times faster) |
| `SANDBOX_PREFILL_MS_PER_TOKEN` | 0.08 | prefill compute per uncached prompt token (divided by TP size) |
| `SANDBOX_DECODE_STEP_MS` | 12 | one decode step with a batch of one |
| `SANDBOX_DECODE_MS_PER_SEQ` | 0.25 | extra step time per running sequence |
| `SANDBOX_STEP_OVERHEAD_MS` | 0.5 | scheduler overhead per step |
| `SANDBOX_MAX_NUM_SEQS` | 64 | running-batch bound (`--max-num-seqs` wins) |
| `SANDBOX_MAX_NUM_BATCHED_TOKENS` | 2048 | tokens per step (`--max-num-batched-tokens`) |
| `SANDBOX_NUM_GPU_BLOCKS` | 8192 | KV blocks (`--num-gpu-blocks-override`); the prefix-cache LRU bound |
| `SANDBOX_KV_BYTES_PER_TOKEN` | 114688 | KV bytes per token (Qwen3-0.6B: 28 layers × 2 × 8 × 128 × 2 B) |
| `SANDBOX_KV_BANDWIDTH_GBPS` | 12.5 | link bandwidth in GB/s (100 Gbit RDMA) |
| `SANDBOX_KV_LATENCY_MS` | 2 | per-transfer latency |
| `SANDBOX_KV_TIMEOUT_MS` | 1000 | how long a pull waits on a dead link before giving up |
| `SANDBOX_KV_FAILURE_POLICY` | recompute | after a failed pull: `recompute` the prompt or `fail` (MindIE) |
| `SANDBOX_KV_HOLD_SECONDS` | 30 | how long prefill keeps a finished request's KV for the pull |
| `SANDBOX_LINK_SETUP_MS` | 150 | setting up one LLM-DataDist link (MindIE role assignment) |
| `SANDBOX_LINK_TEARDOWN_MS` | 50 | tearing one link down |
| `SANDBOX_ROLE_SWITCH_MS` | 500 | the in-place role switch itself (the engine re-initialises its P/D side) |
| `SANDBOX_STARTUP_SECONDS` | 0 | `/health` answers 503 this long after start (model loading) |
| `SANDBOX_JITTER` | 0 | random ± fraction on every step time (0.1 = ±10 %) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from perfmodel.model.config import PerfConfig
from sandbox.engine.spec import EngineArgumentError, EngineSpec
from sandbox.engine.vllm_args import VllmArgs, parse

DEFAULTS: dict[str, float] = {
    "SANDBOX_TIME_SCALE": 1.0,
    "SANDBOX_PREFILL_MS_PER_TOKEN": 0.08,
    "SANDBOX_DECODE_STEP_MS": 12.0,
    "SANDBOX_DECODE_MS_PER_SEQ": 0.25,
    "SANDBOX_STEP_OVERHEAD_MS": 0.5,
    "SANDBOX_MAX_NUM_SEQS": 64,
    "SANDBOX_MAX_NUM_BATCHED_TOKENS": 2048,
    "SANDBOX_NUM_GPU_BLOCKS": 8192,
    "SANDBOX_KV_BYTES_PER_TOKEN": 114688,
    "SANDBOX_KV_BANDWIDTH_GBPS": 12.5,
    "SANDBOX_KV_LATENCY_MS": 2.0,
    "SANDBOX_KV_TIMEOUT_MS": 1000.0,
    "SANDBOX_KV_HOLD_SECONDS": 30.0,
    "SANDBOX_LINK_SETUP_MS": 150.0,
    "SANDBOX_LINK_TEARDOWN_MS": 50.0,
    "SANDBOX_ROLE_SWITCH_MS": 500.0,
    "SANDBOX_STARTUP_SECONDS": 0.0,
    "SANDBOX_JITTER": 0.0,
}


def api_key(spec: EngineSpec) -> str | None:
    """The key clients must send as `Authorization: Bearer <key>` (`--api-key`, or `VLLM_API_KEY`)."""
    args = list(spec.args)
    for index, arg in enumerate(args):
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1]
        if arg in ("--api-key", "--api_key") and index + 1 < len(args):
            return args[index + 1]
    return spec.env_dict().get("VLLM_API_KEY") or None


def _number(name: str, pod_env: Mapping[str, str], process_env: Mapping[str, str]) -> float:
    raw = pod_env.get(name, process_env.get(name))
    if raw is None or raw == "":
        return DEFAULTS[name]
    try:
        value = float(raw)
    except ValueError:
        raise EngineArgumentError(f"ValueError: {name}={raw!r} is not a number") from None
    if value < 0:
        raise EngineArgumentError(f"ValueError: {name}={raw!r} must not be negative")
    return value


def perf_config(spec: EngineSpec, process_env: Mapping[str, str] | None = None) -> PerfConfig:
    env = spec.env_dict()
    proc = os.environ if process_env is None else process_env

    def num(name: str) -> float:
        return _number(name, env, proc)

    args = _engine_args(spec)
    tp = max(1, args.int_value("--tensor-parallel-size", 1))
    policy = env.get("SANDBOX_KV_FAILURE_POLICY", proc.get("SANDBOX_KV_FAILURE_POLICY", ""))
    if not policy:
        policy = "fail" if spec.engine == "mindie" else "recompute"
    if policy not in ("recompute", "fail"):
        raise EngineArgumentError(f"ValueError: SANDBOX_KV_FAILURE_POLICY={policy!r}: use recompute or fail")
    scale = num("SANDBOX_TIME_SCALE")
    if scale <= 0:
        raise EngineArgumentError("ValueError: SANDBOX_TIME_SCALE must be positive")
    return PerfConfig(
        time_scale=scale,
        prefill_ms_per_token=num("SANDBOX_PREFILL_MS_PER_TOKEN") / tp,
        decode_step_ms=num("SANDBOX_DECODE_STEP_MS"),
        decode_ms_per_seq=num("SANDBOX_DECODE_MS_PER_SEQ"),
        step_overhead_ms=num("SANDBOX_STEP_OVERHEAD_MS"),
        max_num_seqs=max(1, args.int_value("--max-num-seqs", int(num("SANDBOX_MAX_NUM_SEQS")))),
        max_num_batched_tokens=max(
            16, args.int_value("--max-num-batched-tokens", int(num("SANDBOX_MAX_NUM_BATCHED_TOKENS")))
        ),
        max_model_len=max(16, args.int_value("--max-model-len", 8192)),
        block_size=max(1, args.int_value("--block-size", 16)),
        num_gpu_blocks=max(
            16, args.int_value("--num-gpu-blocks-override", int(num("SANDBOX_NUM_GPU_BLOCKS")))
        ),
        prefix_caching=args.prefix_caching,
        kv_bytes_per_token=int(num("SANDBOX_KV_BYTES_PER_TOKEN")),
        kv_bandwidth_gbps=max(0.001, num("SANDBOX_KV_BANDWIDTH_GBPS")),
        kv_latency_ms=num("SANDBOX_KV_LATENCY_MS"),
        kv_timeout_ms=num("SANDBOX_KV_TIMEOUT_MS"),
        kv_failure_policy=policy,
        kv_hold_seconds=num("SANDBOX_KV_HOLD_SECONDS"),
        link_setup_ms=num("SANDBOX_LINK_SETUP_MS"),
        link_teardown_ms=num("SANDBOX_LINK_TEARDOWN_MS"),
        role_switch_ms=num("SANDBOX_ROLE_SWITCH_MS"),
        startup_seconds=num("SANDBOX_STARTUP_SECONDS"),
        jitter=min(1.0, num("SANDBOX_JITTER")),
    )


_SGLANG_TO_VLLM = {
    "--max-running-requests": "--max-num-seqs",
    "--chunked-prefill-size": "--max-num-batched-tokens",
    "--context-length": "--max-model-len",
    "--page-size": "--block-size",
    "--tp-size": "--tensor-parallel-size",
    "--tp": "--tensor-parallel-size",
}


def _engine_args(spec: EngineSpec) -> VllmArgs:
    """The performance-relevant flags, read with vLLM's names (SGLang's are mapped onto them)."""
    if spec.engine == "vllm":
        return parse(list(spec.args), EngineArgumentError)
    out = VllmArgs(model=spec.model)
    argv = list(spec.args)
    for index, arg in enumerate(argv):
        name = arg.split("=", 1)[0]
        if name == "--disable-radix-cache":
            out.flags.add("--no-enable-prefix-caching")
        target = _SGLANG_TO_VLLM.get(name)
        if target is None:
            continue
        value = arg.split("=", 1)[1] if "=" in arg else (argv[index + 1] if index + 1 < len(argv) else "")
        try:
            int(value)
        except ValueError:
            raise EngineArgumentError(
                f"launch_server.py: error: argument {name}: invalid int value: '{value}'"
            ) from None
        out.values[target] = value
    return out
