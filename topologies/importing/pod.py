"""One role's pod template → the spec's role fields, with a note for every part of it. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topologies.importing import argv
from topologies.importing.report import Report
from topologies.spec import CREDENTIAL_ENV

ENGINE_CONTAINER_NAMES = ("vllm", "sglang", "mindie", "engine", "server")
# Env Tandem renders itself (engine.container_env): an imported value for these is replaced.
RENDERED_ENV = {
    "POD_IP",
    "HCCL_IF_IP",
    "HCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "VLLM_NIXL_SIDE_CHANNEL_PORT",
    "VLLM_MOONCAKE_BOOTSTRAP_PORT",
    "MIES_INSTALL_PATH",
    "MIES_SERVICE_MONITOR_MODE",
    "TANDEM_ENGINE_ID",
    "TANDEM_ROLE",
    "TANDEM_ENGINE",
    "TANDEM_KV_CONNECTOR",
}
SHM_PATH = "/dev/shm"  # noqa: S108 (shared memory mount)
KNOWN_POD_KEYS = {"containers", "volumes", "nodeSelector"}


@dataclass
class RoleDraft:
    role: dict[str, Any] = field(default_factory=dict)
    image: str = ""
    engine: str = ""
    port: int | None = None
    connector: str = ""
    line: argv.CommandLine | None = None
    values: dict[str, str] = field(default_factory=dict)


def _looks_like_engine(container: dict[str, Any], role: str) -> int:
    text = " ".join(str(t) for t in (container.get("command") or []) + (container.get("args") or []))
    score = 0
    if container.get("name") == role:
        score += 4
    if container.get("name") in ENGINE_CONTAINER_NAMES:
        score += 3
    if argv.engine_from_image(str(container.get("image", ""))):
        score += 2
    if "vllm" in text or "sglang" in text or "mindie" in text:
        score += 1
    return score


def engine_container(containers: list[dict[str, Any]], role: str) -> dict[str, Any] | None:
    ranked = sorted(
        (c for c in containers if isinstance(c, dict)), key=lambda c: -_looks_like_engine(c, role)
    )
    return ranked[0] if ranked and _looks_like_engine(ranked[0], role) > 0 else None


def _quantity(value: Any) -> str:
    return str(value).strip() if value is not None else ""


def _resources(container: dict[str, Any], src: str, out: dict[str, Any], report: Report) -> None:
    res = container.get("resources") or {}
    limits = res.get("limits") or {}
    requests = res.get("requests") or {}
    names = sorted(set(limits) | set(requests))
    extended = [n for n in names if "/" in n]
    if extended:
        name = extended[0]
        count = _quantity(limits.get(name, requests.get(name)))
        out["accelerator_resource"] = name
        out["accelerator_count"] = count
        report.mapped(f"{src}.resources", "accelerator_resource", f"{name}: {count}")
        for other in extended[1:]:
            report.unsupported(
                f"{src}.resources.{other}", "a second extended resource; Tandem requests one accelerator kind"
            )
    else:
        out["accelerator_resource"] = ""
        out["accelerator_count"] = 0
    for name in ("cpu", "memory"):
        if name not in names:
            continue
        request, limit = _quantity(requests.get(name)), _quantity(limits.get(name))
        out[name] = request or limit
        report.mapped(f"{src}.resources.{name}", name, f"{name} {out[name]} (request and limit)")
        if request and limit and request != limit:
            report.unsupported(
                f"{src}.resources.limits.{name}",
                f"limit {limit} differs from request {request}; Tandem sets both to {request}",
            )
    for name in names:
        if "/" not in name and name not in ("cpu", "memory"):
            report.unsupported(f"{src}.resources.{name}", f"resource {name} is not part of a topology spec")


# Rendered env whose imported value becomes a connector field.
ENV_FIELDS = {
    "VLLM_NIXL_SIDE_CHANNEL_PORT": "side_channel_port",
    "VLLM_MOONCAKE_BOOTSTRAP_PORT": "bootstrap_port",
}


def _env(
    container: dict[str, Any], src: str, out: dict[str, Any], values: dict[str, str], report: Report
) -> None:
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if not isinstance(item, dict) or "name" not in item:
            continue
        name = str(item["name"])
        where = f"{src}.env[{name}]"
        if name in RENDERED_ENV:
            if name in ENV_FIELDS and "value" in item:
                values[ENV_FIELDS[name]] = str(item["value"])
                report.mapped(where, f"connector.{ENV_FIELDS[name]}", f"{name}={item['value']}")
            else:
                report.mapped(where, "", f"{name} is rendered by Tandem for this engine and connector")
            continue
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            env[name] = f"secret:{ref.get('name')}/{ref.get('key')}"
            report.mapped(where, f"env.{name}", f"reference to Secret {ref.get('name')} key {ref.get('key')}")
            continue
        if "valueFrom" in item:
            report.unsupported(
                where, f"{name} is read from {item['valueFrom']}; a spec env value is a string"
            )
            continue
        value = str(item.get("value", ""))
        if CREDENTIAL_ENV.search(name):
            report.unsupported(
                where,
                f"{name} looks like a credential and is not copied into the spec (every viewer reads it); "
                "put it in a Secret and set the env value to secret:<secret-name>/<key>",
            )
            continue
        env[name] = value
        report.verbatim(where, f"env.{name}", f"{name}={value}")
    out["env"] = env


def _volumes(pod: dict[str, Any], container: dict[str, Any], src: str, engine: str, report: Report) -> None:
    mounts = {m.get("name"): m for m in container.get("volumeMounts") or [] if isinstance(m, dict)}
    for volume in pod.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        name = volume.get("name")
        mount = mounts.get(name, {})
        where = f"{src}.volumes[{name}]"
        if mount.get("mountPath") == SHM_PATH and "emptyDir" in volume:
            report.mapped(where, "", "shared memory at /dev/shm (Tandem renders an 8Gi in-memory emptyDir)")
        elif mount.get("mountPath") == "/etc/hccn.conf" and engine in ("vllm-ascend", "mindie"):
            report.mapped(where, "", "the node's /etc/hccn.conf (Tandem mounts it for Ascend engines)")
        else:
            what = mount.get("mountPath") or "not mounted by the engine container"
            report.unsupported(where, f"volume {name} ({what}) is not part of a topology spec")


def read_role(pod: dict[str, Any], role: str, src: str, report: Report) -> RoleDraft:
    draft = RoleDraft()
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    container = engine_container(containers, role)
    if container is None:
        report.unsupported(f"{src}.containers", f"no engine container found for role {role}")
        return draft
    csrc = f"{src}.containers[{container.get('name')}]"
    for other in containers:
        if other is not container:
            report.unsupported(
                f"{src}.containers[{other.get('name')}]",
                f"sidecar {other.get('name')} ({other.get('image')}); Tandem renders one engine container",
            )
    for init in pod.get("initContainers") or []:
        if isinstance(init, dict):
            report.unsupported(
                f"{src}.initContainers[{init.get('name')}]",
                f"init container {init.get('name')} ({init.get('image')}); Tandem renders none",
            )
    for key in sorted(set(pod) - KNOWN_POD_KEYS - {"initContainers"}):
        report.unsupported(f"{src}.{key}", f"pod field {key} is not part of a topology spec")
    for key in sorted(set(container) - {"name", "image", "imagePullPolicy", "command", "args", "env"}):
        if key in ("resources", "ports", "volumeMounts", "readinessProbe"):
            continue
        report.unsupported(f"{csrc}.{key}", f"container field {key} is not part of a topology spec")
    draft.image = str(container.get("image", ""))
    report.mapped(f"{csrc}.image", "image", draft.image)
    try:
        tokens = argv.argv(list(container.get("command") or []), list(container.get("args") or []))
    except argv.NotACommandLine as script:
        report.unsupported(
            f"{csrc}.command",
            f"runs a shell script ({script}); Tandem renders the engine's command line from the spec",
        )
        tokens = []
    line = argv.parse(tokens, image=draft.image)
    draft.line = line
    draft.engine = line.engine
    draft.values = dict(line.values)
    out: dict[str, Any] = {}
    for key in ("tensor_parallel_size", "data_parallel_size"):
        if key in line.values:
            out[key] = line.values[key]
            report.mapped(f"{csrc}.args", key, f"{key} {line.values[key]}")
    if line.extra_args:
        out["extra_args"] = list(line.extra_args)
        report.verbatim(f"{csrc}.args", "extra_args", " ".join(line.extra_args))
    for switch in line.dropped:
        report.mapped(f"{csrc}.args", "", f"{switch} is rendered by Tandem for {line.engine}")
    draft.connector = argv.connector_of(line)
    _resources(container, csrc, out, report)
    _env(container, csrc, out, draft.values, report)
    _volumes(pod, container, src, draft.engine, report)
    if pod.get("nodeSelector"):
        out["node_selector"] = {str(k): str(v) for k, v in pod["nodeSelector"].items()}
        report.verbatim(f"{src}.nodeSelector", "node_selector", str(out["node_selector"]))
    if "port" in line.values:
        draft.port = _int(line.values["port"])
    else:
        ports = [p.get("containerPort") for p in container.get("ports") or [] if isinstance(p, dict)]
        probe = ((container.get("readinessProbe") or {}).get("httpGet") or {}).get("port")
        draft.port = _int(ports[0]) if ports else _int(probe)
    draft.role = out
    return draft


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
