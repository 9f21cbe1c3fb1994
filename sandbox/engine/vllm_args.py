"""vLLM command-line arguments as `vllm serve` reads them: the flags the simulator uses, typed and checked.

Unknown flags are accepted (vLLM has hundreds and grows every release) unless they look like a
misspelling of a known one, which argparse would reject as `unrecognized arguments`.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROG = "vllm serve"

INT_FLAGS = {
    "--port": "--port",
    "--tensor-parallel-size": "--tensor-parallel-size/-tp",
    "-tp": "--tensor-parallel-size/-tp",
    "--pipeline-parallel-size": "--pipeline-parallel-size/-pp",
    "--data-parallel-size": "--data-parallel-size/-dp",
    "--data-parallel-size-local": "--data-parallel-size-local/-dpl",
    "--data-parallel-rpc-port": "--data-parallel-rpc-port/-dpp",
    "--max-num-seqs": "--max-num-seqs",
    "--max-num-batched-tokens": "--max-num-batched-tokens",
    "--max-model-len": "--max-model-len",
    "--block-size": "--block-size",
    "--num-gpu-blocks-override": "--num-gpu-blocks-override",
    "--seed": "--seed",
}
FLOAT_FLAGS = {"--gpu-memory-utilization", "--swap-space"}
JSON_FLAGS = {
    "--kv-transfer-config",
    "--speculative-config",
    "--compilation-config",
    "--additional-config",
    "--kv-events-config",
}
CHOICE_FLAGS = {
    "--block-size": ("1", "8", "16", "32", "64", "128"),
    "--dtype": ("auto", "half", "float16", "bfloat16", "float", "float32"),
    "--uvicorn-log-level": ("debug", "info", "warning", "error", "critical", "trace"),
    "--kv-cache-dtype": ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"),
}
BOOL_FLAGS = {
    "--trust-remote-code",
    "--enforce-eager",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--enable-chunked-prefill",
    "--no-enable-chunked-prefill",
    "--enable-expert-parallel",
    "--async-scheduling",
    "--disable-log-requests",
    "--disable-log-stats",
    "--no-disable-hybrid-kv-cache-manager",
    "--disable-hybrid-kv-cache-manager",
    "--enable-auto-tool-choice",
}
VALUE_FLAGS = {
    "--host",
    "--model",
    "--served-model-name",
    "--quantization",
    "--chat-template",
    "--data-parallel-address",
    "--tokenizer",
    "--api-key",
    "--tool-call-parser",
    "--max-logprobs",
    "--distributed-executor-backend",
}
KNOWN_FLAGS = set(INT_FLAGS) | FLOAT_FLAGS | JSON_FLAGS | set(CHOICE_FLAGS) | BOOL_FLAGS | VALUE_FLAGS

# Connector names vLLM and vllm-ascend register, by transfer family.
CONNECTORS: dict[str, str] = {
    "NixlConnector": "nixl",
    "MooncakeConnector": "mooncake",
    "MooncakeConnectorV1": "mooncake",
    "MooncakeLayerwiseConnector": "mooncake",
    "MooncakeStoreConnector": "mooncake",
    "MooncakeConnectorStoreV1": "mooncake",
    "AscendStoreConnector": "mooncake",
    "LLMDataDistCMgrConnector": "llm-datadist",
    "llm-datadist": "llm-datadist",
    "LMCacheConnectorV1": "lmcache",
    "P2pNcclConnector": "p2p-nccl",
    "SharedStorageConnector": "shared-storage",
    "OffloadingConnector": "offloading",
    "MultiConnector": "multi",
}
STORE_CONNECTORS = {"MooncakeStoreConnector", "MooncakeConnectorStoreV1", "AscendStoreConnector"}
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")


def connector_family(name: str | None) -> str | None:
    """nixl | mooncake | llm-datadist | lmcache | ... for a connector name (None without one)."""
    if not name:
        return None
    if name in CONNECTORS:
        return CONNECTORS[name]
    lowered = name.lower()
    for key in ("nixl", "mooncake", "datadist", "lmcache"):
        if key in lowered:
            return "llm-datadist" if key == "datadist" else key
    return lowered


def needs_mooncake_master(connector: str, env: Mapping[str, str]) -> bool:
    if connector in STORE_CONNECTORS:
        return True
    return connector == "LMCacheConnectorV1" and env.get("LMCACHE_REMOTE_URL", "").startswith(
        "mooncakestore://"
    )


@dataclass
class VllmArgs:
    model: str | None = None
    served_model_name: str | None = None
    port: int | None = None
    kv_transfer_config: dict[str, Any] | None = None
    values: dict[str, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)

    def int_value(self, flag: str, default: int) -> int:
        return int(self.values[flag]) if flag in self.values else default

    def float_value(self, flag: str, default: float) -> float:
        return float(self.values[flag]) if flag in self.values else default

    @property
    def prefix_caching(self) -> bool:
        return "--no-enable-prefix-caching" not in self.flags


def _normalise(flag: str) -> str:
    if flag.startswith("--"):
        return "--" + flag[2:].replace("_", "-")
    return flag


def parse(argv: list[str], error: type[Exception]) -> VllmArgs:
    """Parse vLLM's argv; raise `error(<the line vLLM prints>)` for what vLLM would refuse."""
    out = VllmArgs()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        raw = argv[i]
        if not raw.startswith("-") or raw == "-":
            positional.append(raw)
            i += 1
            continue
        name, inline = raw, None
        if "=" in raw:
            name, inline = raw.split("=", 1)
        flag = _normalise(name)
        if flag in BOOL_FLAGS:
            out.flags.add(flag)
            i += 1
            continue
        if inline is not None:
            value = inline
            i += 1
        elif i + 1 < len(argv) and not (argv[i + 1].startswith("--") and flag not in JSON_FLAGS):
            value = argv[i + 1]
            i += 2
        elif flag in KNOWN_FLAGS:
            raise error(f"{PROG}: error: argument {INT_FLAGS.get(flag, flag)}: expected one argument")
        else:
            _check_unknown(flag, error)
            out.flags.add(flag)
            i += 1
            continue
        if flag not in KNOWN_FLAGS:
            _check_unknown(flag, error)
        out.values["--tensor-parallel-size" if flag == "-tp" else flag] = value
    for flag, value in out.values.items():
        _check_value(flag, value, error)
    if positional:
        out.model = positional[0]
    out.model = out.values.get("--model", out.model)
    out.served_model_name = out.values.get("--served-model-name")
    if "--port" in out.values:
        out.port = int(out.values["--port"])
    if out.model is None:
        raise error(f"{PROG}: error: the following arguments are required: model_tag")
    if "--kv-transfer-config" in out.values:
        out.kv_transfer_config = _kv_transfer_config(out.values["--kv-transfer-config"], error)
    return out


def _check_unknown(flag: str, error: type[Exception]) -> None:
    close = difflib.get_close_matches(flag, sorted(KNOWN_FLAGS), n=1, cutoff=0.88)
    if close:
        raise error(f"{PROG}: error: unrecognized arguments: {flag} (did you mean {close[0]}?)")


def _check_value(flag: str, value: str, error: type[Exception]) -> None:
    label = INT_FLAGS.get(flag, flag)
    if flag in INT_FLAGS:
        try:
            int(value)
        except ValueError:
            raise error(f"{PROG}: error: argument {label}: invalid int value: '{value}'") from None
    if flag in FLOAT_FLAGS:
        try:
            number = float(value)
        except ValueError:
            raise error(f"{PROG}: error: argument {flag}: invalid float value: '{value}'") from None
        if flag == "--gpu-memory-utilization" and not 0 < number <= 1:
            raise error(f"ValueError: GPU memory utilization must be within (0, 1]. Got {number}.")
    if flag in CHOICE_FLAGS and value not in CHOICE_FLAGS[flag]:
        choices = ", ".join(repr(c) for c in CHOICE_FLAGS[flag])
        raise error(f"{PROG}: error: argument {flag}: invalid choice: '{value}' (choose from {choices})")
    if flag in JSON_FLAGS and flag != "--kv-transfer-config":
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            raise error(
                f"{PROG}: error: argument {flag}: Value {value} cannot be converted to dict: {exc}"
            ) from None


def _kv_transfer_config(value: str, error: type[Exception]) -> dict[str, Any]:
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        raise error(
            f"{PROG}: error: argument --kv-transfer-config: Value {value} cannot be converted to "
            f"KVTransferConfig: {exc}"
        ) from None
    if not isinstance(config, dict):
        raise error(f"{PROG}: error: argument --kv-transfer-config: Value {value} is not a JSON object")
    connector = config.get("kv_connector")
    role = config.get("kv_role")
    if connector is not None and role is None:
        raise error(
            "ValueError: Please specify kv_role when kv_connector is set, supported roles are "
            f"{list(KV_ROLES)}"
        )
    if role is not None and role not in KV_ROLES:
        raise error(f"ValueError: Unsupported kv_role: {role}. Supported roles are {list(KV_ROLES)}")
    if connector is not None and connector not in CONNECTORS and not config.get("kv_connector_module_path"):
        raise error(f"ValueError: Unsupported connector type: {connector}")
    for key in ("kv_rank", "kv_parallel_size", "kv_port"):
        if key in config and not str(config[key]).isdigit():
            raise error(
                f"pydantic_core.ValidationError: KVTransferConfig.{key}: Input should be a valid integer"
            )
    return config
