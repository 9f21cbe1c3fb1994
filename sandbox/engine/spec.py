"""What a pod asks its engine to be: `parse_engine_spec(pod)` reads the container like the engine would.

The engine container is the first container whose image or command names an engine (Kthena's
Ascend example puts a `runtime` sidecar first), else the first container. Its argv is the
container `command` + `args` with Kubernetes `$(VAR)` expansion; `sh -c` / `bash -c` scripts are
walked (see `shell.py`), following scripts mounted from ConfigMaps when the caller passes their
contents as `files={"/workspace/prefill.sh": "..."}`.

Role: vLLM `--kv-transfer-config` `kv_role` (kv_producer → prefill, kv_consumer → decode,
kv_both → the pod's `modelserving.volcano.sh/role` or `tandem.io/role` label, else both); SGLang
`--disaggregation-mode`; MindIE the `MINDIE_ROLE` / `ROLE` env. Mooncake master: connectors that
use the Mooncake Store (`MooncakeStoreConnector`, `MooncakeConnectorStoreV1`, `AscendStoreConnector`,
LMCache with a `mooncakestore://` remote) need one: `MOONCAKE_MASTER` env, or
`kv_connector_extra_config.master_server_address` / `mooncake_master`, or — when only
`MOONCAKE_CONFIG_PATH` is set — the conventional `mooncake-master:50051`. Transfer-engine
connectors (`MooncakeConnector`, `MooncakeConnectorV1`, SGLang's mooncake backend) need none.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sandbox.engine import vllm_args
from sandbox.engine.shell import ShellError, ShellState, find_command


class EngineArgumentError(Exception):
    """The engine refuses its arguments; str(e) is the log line a real engine would print."""


@dataclass(frozen=True)
class EngineSpec:
    engine: str  # "vllm" | "sglang" | "mindie"
    role: str  # "prefill" | "decode" | "both"
    model: str  # served model name
    port: int  # HTTP port the engine listens on
    kv_connector: str | None
    mooncake_master: str | None  # "host:port" when the connector needs a Mooncake master
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    device_ips: tuple[str, ...] = ()  # its NPUs' device IPs (the Ascend device plugin's annotation)
    # MindIE's own management and metrics ports (ServerConfig managementPort / metricsPort), when they
    # differ from ``port``: MindIE then serves its management routes and /metrics only there.
    management_port: int | None = None
    metrics_port: int | None = None

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


ROLE_LABELS = ("modelserving.volcano.sh/role", "tandem.io/role")
DEFAULT_MOONCAKE_MASTER = "mooncake-master:50051"
_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_FIELD_LABEL = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def parse_engine_spec(pod: Mapping[str, Any], files: Mapping[str, str] | None = None) -> EngineSpec:
    metadata = pod.get("metadata") or {}
    labels: dict[str, str] = dict(metadata.get("labels") or {})
    containers = list((pod.get("spec") or {}).get("containers") or [])
    if not containers:
        raise EngineArgumentError("Error: pod has no containers to run")
    container = next((c for c in containers if _engine_of_container(c) is not None), containers[0])
    env = _container_env(container, pod)
    command = [_k8s_expand(str(a), env) for a in container.get("command") or []]
    args = [_k8s_expand(str(a), env) for a in container.get("args") or []]
    image = str(container.get("image") or "")
    argv = command + args
    state = ShellState(env=dict(env), files=dict(files or {}))
    if argv and posixpath.basename(argv[0]) in _SHELLS:
        state.shell = posixpath.basename(argv[0])
        script_index = argv.index("-c") + 1 if "-c" in argv else None
        try:
            if script_index is not None and script_index < len(argv):
                found = find_command(argv[script_index], state, _is_engine_argv)
            else:
                found = find_command(" ".join(_quote(a) for a in argv[1:]), state, _is_engine_argv)
        except ShellError as exc:
            raise EngineArgumentError(str(exc)) from exc
        if found is None:
            raise EngineArgumentError(
                f"{state.shell}: no inference engine command found in the container script"
            )
        argv = found
        env = state.env
    kind = _engine_of_argv(argv) if argv else None
    if kind is None:
        kind = _engine_of_image(image)
    if kind is None:
        raise EngineArgumentError(
            f"exec: {argv[0] if argv else image!r}: not a vLLM, SGLang or MindIE engine (image {image})"
        )
    engine_args = _strip_launcher(argv, kind)
    ports = [p.get("containerPort") for p in container.get("ports") or [] if p.get("containerPort")]
    default_port = int(ports[0]) if ports else None
    if kind == "vllm":
        # argparse names the program in its errors: `vllm` for `vllm serve`, the module's file otherwise.
        launcher = "api_server.py" if "vllm.entrypoints.openai.api_server" in argv[:4] else "vllm serve"
        spec = _vllm_spec(engine_args, env, labels, default_port, launcher)
    elif kind == "sglang":
        spec = _sglang_spec(engine_args, env, default_port)
    else:
        spec = _mindie_spec(engine_args, env, labels, default_port, state.files)
    return replace(spec, device_ips=device_ips(metadata.get("annotations") or {}))


ASCEND_ANNOTATIONS = (
    "ascend.kubectl.kubernetes.io/ascend-910-configuration",
    "ascend.kubectl.kubernetes.io/ascend-npu-configuration",
)


def device_ips(annotations: Mapping[str, Any]) -> tuple[str, ...]:
    """The device IPs of the pod's NPUs, in the order the Ascend device plugin lists them (its
    annotation; the rank table vllm-ascend and MindIE link by is built from it); () without NPUs."""
    for key in ASCEND_ANNOTATIONS:
        try:
            data = json.loads(str(annotations.get(key) or "null"))
            listed = tuple(str(d["device_ip"]) for d in (data or {}).get("devices") or [])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        if listed:
            return listed
    return ()


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def _k8s_expand(value: str, env: Mapping[str, str]) -> str:
    return _K8S_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), value)


def _container_env(container: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, str]:
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        name = item.get("name")
        if not name:
            continue
        if "value" in item and item["value"] is not None:
            env[name] = _k8s_expand(str(item["value"]), env)
            continue
        ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if not ref:
            continue
        value = _field_ref(ref, metadata, status, pod)
        if value is not None:
            env[name] = value
    return env


def _field_ref(
    ref: str, metadata: Mapping[str, Any], status: Mapping[str, Any], pod: Mapping[str, Any]
) -> str | None:
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName"),
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName"),
    }
    if ref in simple:
        value = simple[ref]
        return None if value is None else str(value)
    match = _FIELD_LABEL.fullmatch(ref)
    if match:
        value = (metadata.get(match.group(1)) or {}).get(match.group(2))
        return None if value is None else str(value)
    return None


def _engine_of_image(image: str) -> str | None:
    name = image.rsplit("/", 1)[-1].lower()
    for kind in ("sglang", "mindie", "vllm"):
        if kind in name:
            return kind
    return None


def _engine_of_argv(argv: list[str]) -> str | None:
    words = [posixpath.basename(a) for a in argv[:4]]
    joined = " ".join(argv[:4])
    if words and words[0] == "vllm":
        return "vllm"
    if "-m" in argv[:3]:
        module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
        if module.startswith("vllm"):
            return "vllm"
        if module.startswith("sglang"):
            return "sglang"
    if "mindie" in joined.lower() or (words and words[0].startswith("mindieservice")):
        return "mindie"
    return None


def _is_engine_argv(argv: list[str]) -> bool:
    return _engine_of_argv(argv) is not None


def _engine_of_container(container: Mapping[str, Any]) -> str | None:
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if argv and posixpath.basename(argv[0]) in _SHELLS:
        text = " ".join(argv)
        if "vllm" in text or "sglang" in text or "mindie" in text.lower():
            return _engine_of_image(str(container.get("image") or "")) or "script"
    return _engine_of_argv(argv) or _engine_of_image(str(container.get("image") or ""))


def _strip_launcher(argv: list[str], kind: str) -> list[str]:
    """The engine's own arguments: drop `vllm serve`, `python3 -m module`, a daemon path."""
    if not argv:
        return []
    head = posixpath.basename(argv[0])
    if head == "vllm":
        return argv[2:] if len(argv) > 1 and argv[1] == "serve" else argv[1:]
    if "-m" in argv[:3]:
        return argv[argv.index("-m") + 2 :]
    if kind == "mindie" and ("mindie" in head.lower()):
        return argv[1:]
    if head.startswith("python"):
        return argv[2:]
    return argv


def _role_from_labels(labels: Mapping[str, str]) -> str | None:
    for key in ROLE_LABELS:
        value = labels.get(key)
        if value in ("prefill", "decode"):
            return value
    return None


def _vllm_spec(
    argv: list[str],
    env: dict[str, str],
    labels: Mapping[str, str],
    port: int | None,
    launcher: str = "vllm serve",
) -> EngineSpec:
    parsed = vllm_args.parse(argv, EngineArgumentError, launcher)
    transfer = parsed.kv_transfer_config
    connector: str | None = None
    role = "both"
    master: str | None = None
    if transfer is not None:
        connector = transfer.get("kv_connector")
        kv_role = transfer.get("kv_role")
        if kv_role == "kv_producer":
            role = "prefill"
        elif kv_role == "kv_consumer":
            role = "decode"
        else:
            role = _role_from_labels(labels) or "both"
        if connector is not None and vllm_args.needs_mooncake_master(str(connector), env):
            master = _mooncake_master(transfer, env)
    model = parsed.served_model_name or parsed.model or "default"
    return EngineSpec(
        engine="vllm",
        role=role,
        model=model,
        port=parsed.port or port or 8000,
        kv_connector=connector,
        mooncake_master=master,
        args=tuple(argv),
        env=tuple(sorted(env.items())),
    )


def _mooncake_master(transfer: Mapping[str, Any], env: Mapping[str, str]) -> str:
    extra = transfer.get("kv_connector_extra_config") or {}
    for key in ("master_server_address", "mooncake_master"):
        if isinstance(extra, dict) and extra.get(key):
            return str(extra[key])
    if env.get("MOONCAKE_MASTER"):
        return env["MOONCAKE_MASTER"]
    remote = env.get("LMCACHE_REMOTE_URL", "")
    if remote.startswith("mooncakestore://"):
        return remote.removeprefix("mooncakestore://").strip("/")
    if env.get("MOONCAKE_CONFIG_PATH"):
        return DEFAULT_MOONCAKE_MASTER
    raise EngineArgumentError("ValueError: The environment variable 'MOONCAKE_CONFIG_PATH' is not set.")


_SGLANG_MODES = ("null", "prefill", "decode")
_SGLANG_BACKENDS = ("mooncake", "nixl", "ascend", "fake")


def _sglang_spec(argv: list[str], env: dict[str, str], port: int | None) -> EngineSpec:
    values = _flag_values(argv)
    prog = "launch_server.py"
    mode = values.get("--disaggregation-mode", "null")
    if mode not in _SGLANG_MODES:
        raise EngineArgumentError(
            f"{prog}: error: argument --disaggregation-mode: invalid choice: '{mode}' "
            f"(choose from {', '.join(repr(m) for m in _SGLANG_MODES)})"
        )
    backend = values.get("--disaggregation-transfer-backend", "mooncake")
    if backend not in _SGLANG_BACKENDS:
        raise EngineArgumentError(
            f"{prog}: error: argument --disaggregation-transfer-backend: invalid choice: '{backend}' "
            f"(choose from {', '.join(repr(b) for b in _SGLANG_BACKENDS)})"
        )
    for flag in ("--tp-size", "--tp", "--tensor-parallel-size", "--port", "--dp-size"):
        if flag in values and not values[flag].lstrip("-").isdigit():
            raise EngineArgumentError(f"{prog}: error: argument {flag}: invalid int value: '{values[flag]}'")
    model_path = values.get("--model-path") or values.get("--model")
    if not model_path:
        raise EngineArgumentError(f"{prog}: error: the following arguments are required: --model-path")
    role = {"prefill": "prefill", "decode": "decode"}.get(mode, "both")
    master = env.get("MOONCAKE_MASTER") if values.get("--hicache-storage-backend") == "mooncake" else None
    if values.get("--hicache-storage-backend") == "mooncake" and not master:
        master = DEFAULT_MOONCAKE_MASTER
    return EngineSpec(
        engine="sglang",
        role=role,
        model=values.get("--served-model-name") or model_path,
        port=int(values["--port"]) if "--port" in values else (port or 30000),
        kv_connector=backend if role != "both" else None,
        mooncake_master=master,
        args=tuple(argv),
        env=tuple(sorted(env.items())),
    )


def _mindie_listen_problem(files: Mapping[str, str], env: Mapping[str, str]) -> str:
    """MindIE's rule for the service-plane and management addresses of its config.json ('' when met):
    ``MIES_CONTAINER_IP`` / ``MIES_CONTAINER_MANAGEMENT_IP`` take precedence over ``ipAddress`` /
    ``managementIpAddress``, and an all-zero address is refused unless ``allowAllZeroIpListening``."""
    for path, text in files.items():
        if not path.endswith(".json"):
            continue
        try:
            config = json.loads(text)
        except ValueError:
            continue
        server = config.get("ServerConfig") if isinstance(config, dict) else None
        if not isinstance(server, dict):
            continue
        if server.get("allowAllZeroIpListening") is True:
            return ""
        service = env.get("MIES_CONTAINER_IP") or server.get("ipAddress") or "127.0.0.1"
        management = env.get("MIES_CONTAINER_MANAGEMENT_IP") or server.get("managementIpAddress") or service
        for name, address in (("ipAddress", service), ("managementIpAddress", management)):
            if address in ("0.0.0.0", "::"):
                return (
                    f"[MIE04E13030A] {name} {address} ({path}): listening on all addresses breaks the "
                    "isolation of the service, management and metrics planes and is refused; set the "
                    "pod's address (MIES_CONTAINER_IP / MIES_CONTAINER_MANAGEMENT_IP) or "
                    "allowAllZeroIpListening: true"
                )
    return ""


def _mindie_ports(files: Mapping[str, str]) -> tuple[int | None, int | None, int | None]:
    """(port, managementPort, metricsPort) of MindIE's config.json ServerConfig (MindIE-LLM
    ``server_config.cpp``: managementPort defaults to port; metricsPort is compulsory there, the sandbox
    serves /metrics on the service port without it)."""
    for path, text in files.items():
        if not path.endswith(".json"):
            continue
        try:
            server = json.loads(text).get("ServerConfig")
        except (ValueError, AttributeError):
            continue
        if not isinstance(server, dict):
            continue
        ports = [server.get(k) for k in ("port", "managementPort", "metricsPort")]
        return tuple(p if isinstance(p, int) and not isinstance(p, bool) else None for p in ports)  # type: ignore[return-value]
    return None, None, None


def _mindie_spec(
    argv: list[str],
    env: dict[str, str],
    labels: Mapping[str, str],
    port: int | None,
    files: Mapping[str, str] | None = None,
) -> EngineSpec:
    problem = _mindie_listen_problem(files or {}, env)
    if problem:
        raise EngineArgumentError(problem)
    raw_role = (env.get("MINDIE_ROLE") or env.get("ROLE") or "").lower()
    aliases = {
        "prefill": "prefill",
        "p": "prefill",
        "decode": "decode",
        "d": "decode",
        "": "",
        "both": "both",
    }
    if raw_role not in aliases:
        raise EngineArgumentError(
            f"[MIE04E13030A] role '{raw_role}' is invalid; expected prefill, decode or both (MINDIE_ROLE)"
        )
    role = aliases[raw_role] or _role_from_labels(labels) or "both"
    raw_port = env.get("MINDIE_PORT") or _flag_values(argv).get("--port")
    if raw_port is not None and not raw_port.isdigit():
        raise EngineArgumentError(f"[MIE04E13030A] port '{raw_port}' is not an integer (MINDIE_PORT)")
    model = env.get("MINDIE_MODEL_NAME") or env.get("MODEL_NAME") or labels.get("tandem.io/model") or "mindie"
    configured, management, metrics = _mindie_ports(files or {})
    serving = int(raw_port) if raw_port else (configured or port or 1025)
    return EngineSpec(
        engine="mindie",
        role=role,
        model=model,
        port=serving,
        management_port=management if management not in (None, serving) else None,
        metrics_port=metrics if metrics not in (None, serving) else None,
        kv_connector="llm-datadist" if role != "both" else None,
        mooncake_master=None,
        args=tuple(argv),
        env=tuple(sorted(env.items())),
    )


def _flag_values(argv: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            if "=" in arg:
                name, value = arg.split("=", 1)
                values[name] = value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                values[arg] = argv[i + 1]
                i += 1
            else:
                values[arg] = ""
        i += 1
    return values


def json_loads_or_error(flag: str, value: str, prog: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise EngineArgumentError(
            f"{prog}: error: argument {flag}: invalid loads value: {value!r} ({exc})"
        ) from exc
