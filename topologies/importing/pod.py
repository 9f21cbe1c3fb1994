"""One role's pod template → the spec's role fields, with a note for every part of it. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topologies.importing import argv
from topologies.importing.report import Report
from topologies.spec import CREDENTIAL_ENV
from topologies.spec_overlay import ENGINE_FIELDS, OWNED_LABEL_PREFIXES, POD_FIELDS

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
    "TENT_METRICS_ENABLED",
    "TENT_METRICS_HTTP_PORT",
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
    # Mooncake's transfer engine's metrics server (the renderer's connector.transfer_metrics)
    "TENT_METRICS_ENABLED": "transfer_metrics",
    "TENT_METRICS_HTTP_PORT": "transfer_metrics_port",
}


# Rendered env Tandem must own (identity, role, ports it renders from connector fields).
OWNED_ENV = {"POD_IP", "TANDEM_ENGINE_ID", "TANDEM_ROLE", "TANDEM_ENGINE", "TANDEM_KV_CONNECTOR", *ENV_FIELDS}


def _env(
    container: dict[str, Any],
    src: str,
    out: dict[str, Any],
    values: dict[str, str],
    report: Report,
    carried: list[dict[str, Any]],
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
            elif name in OWNED_ENV:
                report.mapped(where, "", f"{name} is rendered by Tandem for this engine and connector")
            else:  # the source's own value (an interface name, ...) is kept over Tandem's default
                carried.append(item)
                report.verbatim(where, "pod_overlay.engine.env", f"{name} kept as given")
            continue
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            env[name] = f"secret:{ref.get('name')}/{ref.get('key')}"
            report.mapped(where, f"env.{name}", f"reference to Secret {ref.get('name')} key {ref.get('key')}")
            continue
        if "valueFrom" in item:
            carried.append(item)
            report.verbatim(
                where, "pod_overlay.engine.env", f"{name} (read from {next(iter(item['valueFrom']))})"
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


def _volumes(pod: dict[str, Any], container: dict[str, Any], src: str, report: Report) -> None:
    mounts = {m.get("name"): m for m in container.get("volumeMounts") or [] if isinstance(m, dict)}
    for volume in pod.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        name = volume.get("name")
        what = mounts.get(name, {}).get("mountPath") or "not mounted by the engine container"
        report.verbatim(
            f"{src}.volumes[{name}]", "pod_overlay.spec.volumes", f"volume {name} ({what}), as given"
        )


# Container fields the spec models; every other field of the engine container is carried in the overlay.
ENGINE_MODELLED = {"name", "image", "command", "args", "env", "resources", "ports"}


def read_role(
    pod: dict[str, Any], role: str, src: str, report: Report, template_meta: dict[str, Any] | None = None
) -> RoleDraft:
    draft = RoleDraft()
    containers = [c for c in pod.get("containers") or [] if isinstance(c, dict)]
    container = engine_container(containers, role)
    if container is None:
        report.unsupported(f"{src}.containers", f"no engine container found for role {role}")
        return draft
    csrc = f"{src}.containers[{container.get('name')}]"
    sidecars = [other for other in containers if other is not container]
    for other in sidecars:
        report.verbatim(
            f"{src}.containers[{other.get('name')}]",
            "pod_overlay.spec.containers",
            f"sidecar {other.get('name')} ({other.get('image')}), as given",
        )
    for init in pod.get("initContainers") or []:
        if isinstance(init, dict):
            report.verbatim(
                f"{src}.initContainers[{init.get('name')}]",
                "pod_overlay.spec.initContainers",
                f"init container {init.get('name')} ({init.get('image')}), as given",
            )
    carried_pod = {k: v for k, v in pod.items() if k in POD_FIELDS and k != "containers"}
    if sidecars:
        carried_pod["containers"] = sidecars
    for key in sorted(set(pod) - KNOWN_POD_KEYS - {"initContainers"}):
        if key in POD_FIELDS:
            report.verbatim(f"{src}.{key}", f"pod_overlay.spec.{key}", f"pod field {key}, as given")
        else:
            report.unsupported(f"{src}.{key}", f"pod field {key} is not carried by a topology")
    engine_fields = {k: v for k, v in container.items() if k in ENGINE_FIELDS and k not in ENGINE_MODELLED}
    for key in sorted(set(container) - ENGINE_FIELDS - ENGINE_MODELLED):
        report.unsupported(f"{csrc}.{key}", f"container field {key} is not carried by a topology")
    if container.get("name") != role:
        engine_fields["name"] = container.get("name")
    if "imagePullPolicy" not in container:  # Kubernetes' default for this image, written out
        image = str(container.get("image", ""))
        latest = image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]
        engine_fields["imagePullPolicy"] = "Always" if latest and "@" not in image else "IfNotPresent"
    for key in sorted(set(engine_fields) - {"name"}):
        given = "as given" if key in container else "Kubernetes' default for this image, written out"
        report.verbatim(f"{csrc}.{key}", f"pod_overlay.engine.{key}", f"container field {key}, {given}")
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
    carried_env: list[dict[str, Any]] = []
    _env(container, csrc, out, draft.values, report, carried_env)
    if carried_env:
        engine_fields["env"] = carried_env
    _volumes(pod, container, src, report)
    if line.kv_transfer and "data_parallel_size" not in line.values:
        layout = (line.kv_transfer.get("kv_connector_extra_config") or {}).get(role) or {}
        if isinstance(layout, dict) and str(layout.get("dp_size", "")).isdigit():
            out["data_parallel_size"] = int(layout["dp_size"])
            report.mapped(
                f"{csrc}.args",
                "data_parallel_size",
                f"data_parallel_size {layout['dp_size']} (kv_connector_extra_config.{role}.dp_size)",
            )
    meta = template_meta or {}
    overlay_meta = {
        key: {k: v for k, v in (meta.get(key) or {}).items() if not str(k).startswith(OWNED_LABEL_PREFIXES)}
        for key in ("labels", "annotations")
    }
    overlay = {
        "metadata": {k: v for k, v in overlay_meta.items() if v},
        "spec": carried_pod,
        "engine": engine_fields,
    }
    out["pod_overlay"] = {k: v for k, v in overlay.items() if v}
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
