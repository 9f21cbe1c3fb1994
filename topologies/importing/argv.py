"""An engine container's command line: split shell wrappers, recognise the engine, take out the flags
Tandem renders itself and keep the rest verbatim. Pure."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/sh")
SHELL_SYNTAX = re.compile(r"&&|\|\||[;|<>`]|\$\(\(|\bcd\b|\bexport\b|\./")

# Flags whose value Tandem takes into a spec field (name → takes a value).
VALUE_FLAGS = {
    "--model": "model_source",
    "--model-path": "model_source",
    "--served-model-name": "model_name",
    "--port": "port",
    "--host": "",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--tp-size": "tensor_parallel_size",
    "--tp": "tensor_parallel_size",
    "--data-parallel-size": "data_parallel_size",
    "--dp-size": "data_parallel_size",
    "--kv-transfer-config": "kv_transfer_config",
    "--disaggregation-mode": "disaggregation_mode",
    "--disaggregation-transfer-backend": "disaggregation_backend",
    "--disaggregation-bootstrap-port": "bootstrap_port",
}
# Switches Tandem renders itself for some engines (dropping them from extra_args changes nothing).
RENDERED_SWITCHES = {"sglang": ("--enable-metrics", "--enable-pd-role-switch")}

VLLM_CONNECTORS = {
    "NixlConnector": "nixl",
    "MooncakeConnectorV1": "mooncake",
    "MooncakeConnector": "mooncake",
    "MooncakeConnectorStoreV1": "mooncake-store",
    "LMCacheConnectorV1": "lmcache",
    "LLMDataDistCMgrConnector": "llm-datadist",
}


class NotACommandLine(ValueError):
    """The container runs a shell script, not one engine command line."""


@dataclass
class CommandLine:
    engine: str = ""  # vllm | vllm-ascend | sglang | mindie | "" (not recognised)
    values: dict[str, str] = field(default_factory=dict)  # spec-ish key → raw value
    extra_args: list[str] = field(default_factory=list)
    kv_transfer: dict[str, Any] | None = None
    dropped: list[str] = field(default_factory=list)  # switches Tandem renders itself


def argv(command: list[str], args: list[str]) -> list[str]:
    """The command line the container runs; a ``sh -c "<one command>"`` wrapper is unwrapped.
    Raises NotACommandLine for a real script (several commands, cd, export, redirections)."""
    tokens = [str(t) for t in command] + [str(t) for t in args]
    if len(tokens) >= 2 and tokens[0] in SHELLS and tokens[1] == "-c":
        script = " ".join(tokens[2:]).replace("\\\n", " ")
        lines = [line for line in script.splitlines() if line.strip()]
        if len(lines) > 1 or SHELL_SYNTAX.search(script):
            raise NotACommandLine(script.strip()[:200])
        try:
            return shlex.split(script)
        except ValueError as error:
            raise NotACommandLine(f"{script.strip()[:200]} ({error})") from None
    return tokens


def _engine_prefix(tokens: list[str]) -> tuple[str, int]:
    """The engine a command line starts and how many tokens name the program (0 when only args)."""
    if tokens[:2] == ["vllm", "serve"]:
        return "vllm", 2
    for i, token in enumerate(tokens[:4]):
        if token == "-m" and i + 1 < len(tokens):  # noqa: S105 (a flag, not a secret)
            module = tokens[i + 1]
            if module.startswith("vllm."):
                return "vllm", i + 2
            if module.startswith("sglang."):
                return "sglang", i + 2
    if tokens and tokens[0].endswith("mindieservice_daemon"):
        return "mindie", 1
    return "", 0


def engine_from_image(image: str) -> str:
    name = image.lower()
    if "mindie" in name:
        return "mindie"
    if "vllm-ascend" in name or "vllm_ascend" in name:
        return "vllm-ascend"
    if "sglang" in name:
        return "sglang"
    if "vllm" in name:
        return "vllm"
    return ""


def parse(tokens: list[str], *, image: str) -> CommandLine:
    engine, start = _engine_prefix(tokens)
    line = CommandLine(engine=engine or engine_from_image(image))
    rest = tokens[start:]
    if rest and not rest[0].startswith("-"):
        line.values["model_source"] = rest[0]
        rest = rest[1:]
    i = 0
    while i < len(rest):
        token = rest[i]
        flag, eq, inline = token.partition("=")
        if flag in VALUE_FLAGS and (eq or i + 1 < len(rest)):
            value = inline if eq else rest[i + 1]
            i += 1 if eq else 2
            key = VALUE_FLAGS[flag]
            if key == "kv_transfer_config":
                try:
                    parsed = json.loads(value)
                except ValueError:
                    parsed = None
                line.kv_transfer = parsed if isinstance(parsed, dict) else {"unparsed": value}
            elif key:
                line.values[key] = value
            continue
        if token in RENDERED_SWITCHES.get(line.engine, ()):
            line.dropped.append(token)
        else:
            line.extra_args.append(token)
        i += 1
    kv = line.kv_transfer or {}
    if "vllm_ascend" in str(kv.get("kv_connector_module_path", "")) and line.engine == "vllm":
        line.engine = "vllm-ascend"
    return line


def connector_of(line: CommandLine) -> str:
    """The spec's connector type a command line uses, "" when it names none."""
    if line.kv_transfer is not None:
        return VLLM_CONNECTORS.get(str(line.kv_transfer.get("kv_connector", "")), "")
    backend = line.values.get("disaggregation_backend", "")
    if backend in ("mooncake", "nixl"):
        return backend
    return ""
