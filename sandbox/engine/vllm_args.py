"""vLLM command-line arguments as `vllm serve` reads them: every option vLLM knows, typed where the
simulator uses it.

The options and how many values each takes are vLLM 0.32.0's own (`data/vllm-0.32.0-options.json`,
read from its parser; options older releases had and 0.32.0 dropped, such as `--swap-space` and
`--disable-log-requests`, are refused as 0.32.0 refuses them). As vLLM's FlexibleArgumentParser
does: underscores in names are dashes, `-O3` is `--optimization-level 3`, `--json-arg.key value`
sets one key of a JSON option; then as argparse does: an unambiguous prefix of an option is that
option, an ambiguous one is refused (`vllm serve: error: ambiguous option: --max could match ...`),
and options it does not know, with the values after them, end the process with exit status 2 and
`vllm: error: unrecognized arguments: --foo bar` (the top-level `vllm` parser reports what its
`serve` subcommand left over; `python -m vllm.entrypoints.openai.api_server` says `api_server.py`).
Captured from the real engine: `sandbox/tests/data/vllm-0.32.0-argparse-cases.json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
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
    "--block-size": "--block-size",
    "--num-gpu-blocks-override": "--num-gpu-blocks-override",
    "--seed": "--seed",
}
# Token counts vLLM reads with its own argparse types (vllm/utils/argparse_utils.py): 1k = 1000,
# 1K = 1024, and for --max-model-len -1 or "auto" (detect); argparse names the type in its error.
HUMAN_INT_FLAGS = {
    "--max-num-batched-tokens": "human_readable_int",
    "--max-model-len": "human_readable_int_or_auto",
}
FLOAT_FLAGS = {"--gpu-memory-utilization"}
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
        if flag not in self.values:
            return default
        number = human_readable_int(self.values[flag])
        return default if number is None or number < 0 else number

    def float_value(self, flag: str, default: float) -> float:
        return float(self.values[flag]) if flag in self.values else default

    @property
    def prefix_caching(self) -> bool:
        return "--no-enable-prefix-caching" not in self.flags


OPTIONS_FILE = Path(__file__).resolve().parent / "data" / "vllm-0.32.0-options.json"
# How `vllm serve` / `python -m vllm.entrypoints.openai.api_server` name themselves in errors:
# (the subcommand's prog for value errors, the top-level prog for unrecognized arguments).
LAUNCHERS = {"vllm serve": ("vllm serve", "vllm"), "api_server.py": ("api_server.py", "api_server.py")}
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@cache
def options() -> dict[str, str]:
    """Option string → how many values it takes ("0", "1", "+", "?")."""
    return dict(json.loads(OPTIONS_FILE.read_text())["options"])


def _normalise(flag: str) -> str:
    if flag.startswith("--"):
        head, dot, rest = flag[2:].partition(".")
        return "--" + head.replace("_", "-") + dot + rest
    return flag


def _flexible(argv: list[str]) -> list[str]:
    """FlexibleArgumentParser.parse_args' rewriting: dashes, -O, dotted JSON keys folded into JSON."""
    out: list[str] = []
    dotted: dict[str, dict[str, Any]] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            name = _normalise(name)
            if "." in name:
                flag, *keys = name.split(".")
                if not eq:
                    value = argv[i + 1] if i + 1 < len(argv) else ""
                    i += 1
                try:
                    parsed: Any = json.loads(value)
                except json.JSONDecodeError:
                    parsed = value
                node = dotted.setdefault(flag, {})
                for key in keys[:-1]:
                    node = node.setdefault(key, {})
                node[keys[-1]] = parsed
            else:
                out.append(name + eq + value)
        elif arg.startswith("-O") and arg != "-O":
            out += ["--optimization-level", arg[3:] if arg[2:3] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(argv) and argv[i + 1] in {"0", "1", "2", "3"}:
            out.append("--optimization-level")
        else:
            out.append(arg)
        i += 1
    for flag, folded in dotted.items():
        out += [flag, json.dumps(folded)]
    return out


def _resolve(name: str, prog: str, error: type[Exception]) -> str | None:
    """The option `name` stands for (exact, or argparse's unambiguous prefix); None if unknown."""
    known = options()
    if name in known:
        return name
    if not name.startswith("--") or len(name) < 3:
        return None
    matches = [option for option in known if option.startswith(name) and option.startswith("--")]
    if len(matches) > 1:
        could = ", ".join(matches)
        raise error(f"{_usage(prog)}\n{prog}: error: ambiguous option: {name} could match {could}")
    return matches[0] if matches else None


def _is_option(arg: str) -> bool:
    return arg.startswith("-") and arg != "-" and not _NEGATIVE_NUMBER.match(arg)


def parse(argv: list[str], error: type[Exception], launcher: str = "vllm serve") -> VllmArgs:
    """Parse vLLM's argv; raise `error(<what vLLM prints>)` for what vLLM would refuse.

    An argparse refusal's text is the usage line(s) and the error line, as argparse prints them."""
    prog, top = LAUNCHERS.get(launcher, LAUNCHERS["vllm serve"])
    usage, sub_usage = _usage(top), _usage(prog)
    out = VllmArgs()
    extras: list[str] = []
    positional: list[str] = []
    args = _flexible(argv)
    known = options()
    i = 0
    after_unknown = False
    while i < len(args):
        raw = args[i]
        if not _is_option(raw):
            if after_unknown or positional:
                extras.append(raw)
            else:
                positional.append(raw)
            i += 1
            continue
        name, eq, inline = raw.partition("=")
        flag = _resolve(name, prog, error)
        if flag is None:
            extras.append(raw)
            after_unknown = True
            i += 1
            continue
        after_unknown = False
        nargs = known[flag]
        i += 1
        if nargs == "0":
            if eq:
                ignored = f"argument {flag}: ignored explicit argument '{inline}'"
                raise error(f"{sub_usage}\n{prog}: error: {ignored}")
            out.flags.add(flag)
            continue
        values: list[str] = [inline] if eq else []
        if not eq:
            while i < len(args) and not _is_option(args[i]) and (nargs == "+" or not values):
                values.append(args[i])
                i += 1
                if nargs in ("1", "?"):
                    break
        if not values and nargs in ("1", "+"):
            what = "expected one argument" if nargs == "1" else "expected at least one argument"
            raise error(f"{sub_usage}\n{prog}: error: argument {INT_FLAGS.get(flag, flag)}: {what}")
        if values:
            out.values["--tensor-parallel-size" if flag == "-tp" else flag] = values[0]
        else:
            out.flags.add(flag)
    for flag, value in out.values.items():
        _check_value(flag, value, error)
    if extras:
        raise error(f"{usage}\n{top}: error: unrecognized arguments: {' '.join(extras)}")
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


# What argparse prints above its error line: the usage of the parser that reports it (`vllm` for
# leftovers of its `serve` subcommand; api_server.py's is its whole option list, as captured).
USAGE = {
    "vllm": "usage: vllm [-h] [-v]\n"
    "            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,run-batch,snapshot}\n"
    "            ...",
    "vllm serve": "usage: vllm serve [model_tag] [options]",
}
API_SERVER_USAGE_FILE = Path(__file__).resolve().parent / "data" / "vllm-0.32.0-api-server-usage.txt"


def _usage(prog: str) -> str:
    if prog == "api_server.py":
        return API_SERVER_USAGE_FILE.read_text().rstrip("\n")
    return USAGE.get(prog, f"usage: {prog} [options]")


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_MULTIPLIERS = {
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
}


def human_readable_int(value: str, auto: bool = True) -> int | None:
    """vLLM's human_readable_int(_or_auto): '25.6k' → 25600, '2K' → 2048, 'auto'/'-1' → -1; None if
    vLLM would refuse it."""
    value = value.strip()
    if auto and (value == "-1" or value.lower() == "auto"):
        return -1
    match = _HUMAN_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix.isupper():
            return int(number) * _MULTIPLIERS[suffix] if number.isdigit() else None
        return int(float(number) * _MULTIPLIERS[suffix])
    try:
        return int(value)
    except ValueError:
        return None


def _check_value(flag: str, value: str, error: type[Exception]) -> None:
    label = INT_FLAGS.get(flag, flag)
    if flag in HUMAN_INT_FLAGS:
        kind = HUMAN_INT_FLAGS[flag]
        if human_readable_int(value, auto=kind.endswith("_or_auto")) is None:
            raise error(f"{PROG}: error: argument {flag}: invalid {kind} value: '{value}'")
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
