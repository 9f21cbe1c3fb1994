"""Pure helpers the kubelet uses: which container is the engine, volumes, status shapes, backoff."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Any

from sandbox.controllers.base import now_iso

ENGINE_WORDS = ("vllm", "sglang", "mindie")
SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
BROKEN_IMAGE_SUFFIX = "-broken"
BACKOFF_START = 1.0
BACKOFF_CAP = 10.0
_ARGPARSE_ERROR = re.compile(r"^(vllm|vllm serve|api_server\.py|launch_server\.py): error: ")


def is_engine_container(container: dict[str, Any]) -> bool:
    """The container running the inference engine (the others — e.g. Kthena's runtime — are sidecars)."""
    image = str(container.get("image") or "").rsplit("/", 1)[-1].lower()
    if any(word in image for word in ENGINE_WORDS):
        return True
    argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
    if not argv:
        return False
    if posixpath.basename(argv[0]) in SHELLS:
        text = " ".join(argv).lower()
        return any(word in text for word in ENGINE_WORDS)
    if posixpath.basename(argv[0]) == "vllm":
        return True
    if "-m" in argv[:3]:
        index = argv.index("-m") + 1
        return index < len(argv) and argv[index].startswith(("vllm", "sglang"))
    return "mindie" in " ".join(argv[:4]).lower()


def engine_container_name(pod: dict[str, Any]) -> str:
    containers = pod.get("spec", {}).get("containers") or []
    chosen = next((c for c in containers if is_engine_container(c)), containers[0] if containers else {})
    return str(chosen.get("name", ""))


def image_is_broken(image: str) -> bool:
    """Images whose tag ends in `-broken` cannot be pulled (the sandbox's unpullable-image rule)."""
    name = image.rsplit("/", 1)[-1]
    tag = name.rsplit(":", 1)[1] if ":" in name else ""
    return tag.endswith(BROKEN_IMAGE_SUFFIX)


def referenced_volumes(pod: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(volume name, kind "configmap"|"secret", object name) for non-optional references."""
    refs = []
    for volume in pod.get("spec", {}).get("volumes") or []:
        if "configMap" in volume and not volume["configMap"].get("optional"):
            refs.append((volume["name"], "configmap", volume["configMap"].get("name", "")))
        if "secret" in volume and not volume["secret"].get("optional"):
            refs.append((volume["name"], "secret", volume["secret"].get("secretName", "")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "configMap" in source and not source["configMap"].get("optional"):
                refs.append((volume["name"], "configmap", source["configMap"].get("name", "")))
            if "secret" in source and not source["secret"].get("optional"):
                refs.append((volume["name"], "secret", source["secret"].get("name", "")))
    return refs


def env_config_error(
    container: dict[str, Any], namespace: str, lookup: Callable[[str, str], dict[str, Any] | None]
) -> str | None:
    """Why the kubelet cannot build this container's environment, in its words; None when it can.

    As ``kubelet_pods.go`` makeEnvironmentVariables: ``envFrom`` sources first, then each ``env``
    entry's ``configMapKeyRef``/``secretKeyRef``; a missing object is the secret/configmap manager's
    NotFound (``secret "x" not found``), a missing key ``couldn't find key k in Secret ns/x``;
    ``optional: true`` references are skipped. `lookup(kind, name)` returns the object (kind
    "secret" or "configmap") in the pod's namespace, or None.
    """
    for source in container.get("envFrom") or []:
        for field_name, kind in (("configMapRef", "configmap"), ("secretRef", "secret")):
            ref = source.get(field_name)
            if ref is None:
                continue
            name = str(ref.get("name", ""))
            if lookup(kind, name) is None and not ref.get("optional"):
                return f'{kind} "{name}" not found'
    for item in container.get("env") or []:
        value_from = item.get("valueFrom") or {}
        for field_name, kind, label in (
            ("configMapKeyRef", "configmap", "ConfigMap"),
            ("secretKeyRef", "secret", "Secret"),
        ):
            ref = value_from.get(field_name)
            if ref is None:
                continue
            name, key = str(ref.get("name", "")), str(ref.get("key", ""))
            obj = lookup(kind, name)
            if obj is None:
                if ref.get("optional"):
                    continue
                return f'{kind} "{name}" not found'
            keys = set(obj.get("data") or {}) | set(obj.get("binaryData") or {})
            if kind == "secret":
                keys |= set(obj.get("stringData") or {})
            if key not in keys and not ref.get("optional"):
                return f"couldn't find key {key} in {label} {namespace}/{name}"
    return None


def mounted_files(
    pod: dict[str, Any], container_name: str, configmaps: dict[str, dict[str, Any]]
) -> dict[str, str]:
    """Files a container sees from ConfigMap volumes (path → text), honouring `subPath` and `items`."""
    volumes = {v["name"]: v for v in pod.get("spec", {}).get("volumes") or []}
    containers: list[dict[str, Any]] = pod.get("spec", {}).get("containers") or []
    container = next((ct for ct in containers if ct.get("name") == container_name), {})
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount.get("name", ""), {})
        if "configMap" not in volume:
            continue
        data = (configmaps.get(volume["configMap"].get("name", "")) or {}).get("data") or {}
        items = volume["configMap"].get("items")
        mapping = {i["key"]: i.get("path", i["key"]) for i in items} if items else {k: k for k in data}
        base = str(mount.get("mountPath", ""))
        sub_path = mount.get("subPath")
        for key, path in mapping.items():
            if key not in data:
                continue
            if sub_path:
                if sub_path == path:
                    files[base] = str(data[key])
            else:
                files[posixpath.join(base, path)] = str(data[key])
    return files


def service_for_host(host: str, namespace: str, services: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Service a DNS name or cluster IP refers to, as cluster DNS would resolve it from `namespace`."""
    name = host
    for suffix in (".svc.cluster.local", ".svc"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    parts = name.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        return next((s for s in services if s.get("spec", {}).get("clusterIP") == host), None)
    svc_name, svc_ns = (parts[0], parts[1]) if len(parts) >= 2 else (parts[0], namespace)
    return next(
        (
            s
            for s in services
            if s["metadata"]["name"] == svc_name and s["metadata"].get("namespace") == svc_ns
        ),
        None,
    )


def waiting(
    name: str,
    image: str,
    reason: str,
    message: str = "",
    restarts: int = 0,
    last: dict[str, Any] | None = None,
) -> dict[str, Any]:
    state: dict[str, Any] = {"reason": reason}
    if message:
        state["message"] = message
    status = {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": restarts,
        "state": {"waiting": state},
    }
    if last:
        status["lastState"] = last
    return status


def running(
    name: str, image: str, started_at: str, ready: bool, restarts: int = 0, last: dict[str, Any] | None = None
) -> dict[str, Any]:
    status = {
        "name": name,
        "image": image,
        "imageID": f"{image}@sha256:{'0' * 64}",
        "containerID": f"sandbox://{name}-{started_at}",
        "ready": ready,
        "started": True,
        "restartCount": restarts,
        "state": {"running": {"startedAt": started_at}},
    }
    if last:
        status["lastState"] = last
    return status


def terminated(exit_code: int, reason: str, started_at: str, message: str = "") -> dict[str, Any]:
    state: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": reason,
        "startedAt": started_at,
        "finishedAt": now_iso(),
    }
    if message:
        state["message"] = message
    return {"terminated": state}


def condition(kind: str, ok: bool, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": kind,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now_iso(),
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace conditions by type, keeping lastTransitionTime when the status did not change."""
    by_type = {c["type"]: c for c in old}
    for cond in new:
        previous = by_type.get(cond["type"])
        if previous and previous.get("status") == cond["status"]:
            cond = {**cond, "lastTransitionTime": previous.get("lastTransitionTime")}
        by_type[cond["type"]] = cond
    order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    return sorted(by_type.values(), key=lambda c: order.index(c["type"]) if c["type"] in order else 99)


def pod_status(
    pod: dict[str, Any],
    statuses_by_name: dict[str, dict[str, Any]],
    phase: str,
    host_ip: str,
    pod_ip: str,
    started_at: str,
) -> dict[str, Any]:
    """The pod's status from its container statuses: phase, addresses, conditions (pure)."""
    status = dict(pod.get("status") or {})
    statuses = [
        statuses_by_name.get(ct["name"]) or waiting(ct["name"], ct["image"], "ContainerCreating")
        for ct in pod["spec"].get("containers") or []
    ]
    all_ready = bool(statuses) and all(s.get("ready") for s in statuses)
    status["phase"] = phase
    status["hostIP"] = host_ip
    status["hostIPs"] = [{"ip": host_ip}]
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    if started_at:
        status["startTime"] = started_at
    status["containerStatuses"] = statuses
    reason = None if all_ready else "ContainersNotReady"
    not_ready = [s["name"] for s in statuses if not s.get("ready")]
    message = f"containers with unready status: [{' '.join(not_ready)}]" if not_ready else None
    conditions = [
        condition("PodReadyToStartContainers", bool(pod_ip)),
        condition("Initialized", bool(pod_ip)),
        condition("Ready", all_ready, reason, message),
        condition("ContainersReady", all_ready, reason, message),
    ]
    status["conditions"] = merge_conditions(status.get("conditions") or [], conditions)
    return status


def exit_code(lines: list[str]) -> int:
    """How an engine that refused to start exits: 2 when argparse refused its command line (it prints
    ``prog: error: ...`` and calls ``sys.exit(2)``), else 1 (an exception)."""
    return 2 if lines and _ARGPARSE_ERROR.match(lines[-1]) else 1


def phase(pod: dict[str, Any], statuses_by_name: dict[str, dict[str, Any]]) -> str:
    """The pod phase from its containers, as the kubelet's getPhase (restartPolicy Always): Pending while
    a container has never started (waiting with no terminated run before), else Running."""
    for ct in pod["spec"].get("containers") or []:
        status = statuses_by_name.get(ct["name"])
        if status is None:
            return "Pending"
        if "waiting" in status.get("state", {}) and not (status.get("lastState") or {}).get("terminated"):
            return "Pending"
    return "Running"


def next_backoff(current: float) -> float:
    return BACKOFF_START if current <= 0 else min(BACKOFF_CAP, current * 2)
