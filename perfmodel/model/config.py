"""The performance model's parameters: step costs, batch and KV bounds, KV transfer and role-switch costs.

Defaults are shaped like a small model on one accelerator (Qwen3-0.6B's KV size, a 100 Gbit link). The
sandbox's engines read them from their engine arguments and ``SANDBOX_*`` env (``sandbox/engine/config.py``);
the what-if reads them from a topology's calibration (``perfmodel/calibration.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PerfConfig:
    time_scale: float = 1.0
    prefill_ms_per_token: float = 0.08
    decode_step_ms: float = 12.0
    decode_ms_per_seq: float = 0.25
    step_overhead_ms: float = 0.5
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    max_model_len: int = 8192
    block_size: int = 16
    num_gpu_blocks: int = 8192
    prefix_caching: bool = True
    kv_bytes_per_token: int = 114688
    kv_bandwidth_gbps: float = 12.5
    kv_latency_ms: float = 2.0
    kv_timeout_ms: float = 1000.0
    kv_failure_policy: str = "recompute"
    kv_hold_seconds: float = 30.0
    link_setup_ms: float = 150.0
    link_teardown_ms: float = 50.0
    role_switch_ms: float = 500.0
    startup_seconds: float = 0.0
    jitter: float = 0.0

    def transfer_seconds(self, num_bytes: int, slow_factor: float = 1.0, extra_ms: float = 0.0) -> float:
        """Model time of one KV transfer: latency + bytes / bandwidth (unscaled)."""
        seconds = self.kv_latency_ms / 1000 + num_bytes / (self.kv_bandwidth_gbps * 1e9)
        return seconds * slow_factor + extra_ms / 1000
