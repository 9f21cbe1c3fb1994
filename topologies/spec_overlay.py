"""A role's pod-template overlay: what the spec does not model, carried verbatim and applied on render.

Shape (every part optional)::

    pod_overlay:
      metadata: {labels: {...}, annotations: {...}}   # added to the pod template's metadata
      spec: {initContainers: [...], containers: [...sidecars], volumes: [...], tolerations: [...],
             affinity: {...}, securityContext: {...}, ...}   # pod spec fields
      engine: {name: vllm, volumeMounts: [...], livenessProbe: {...}, readinessProbe: {...},
               securityContext: {...}, imagePullPolicy: Always, env: [...], ...}   # the engine container

The fields the spec models (image, command and arguments, resources, node selector, the engine's
ports) are refused here with the spec field to use instead: one source of truth for each value.
``render/overlay.py`` applies it; ``check(raw, path)`` returns the normalised overlay and the problems
by field path. Pure.
"""

from __future__ import annotations

import json
from typing import Any

from topologies.spec import DNS_LABEL, ENV_NAME, LABEL_KEY, LABEL_VALUE

MAX_BYTES = 64 * 1024
# PodSpec fields an overlay may set (Kubernetes core/v1 PodSpec), apart from those the spec models.
POD_FIELDS = {
    "activeDeadlineSeconds",
    "affinity",
    "automountServiceAccountToken",
    "containers",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "hostAliases",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "hostUsers",
    "hostname",
    "imagePullSecrets",
    "initContainers",
    "os",
    "preemptionPolicy",
    "priority",
    "priorityClassName",
    "readinessGates",
    "restartPolicy",
    "runtimeClassName",
    "schedulerName",
    "securityContext",
    "serviceAccount",
    "serviceAccountName",
    "setHostnameAsFQDN",
    "shareProcessNamespace",
    "subdomain",
    "terminationGracePeriodSeconds",
    "tolerations",
    "topologySpreadConstraints",
    "volumes",
}
POD_MODELLED = {"nodeSelector": "roles.<role>.node_selector"}
# Container fields an overlay may set on the engine container.
ENGINE_FIELDS = {
    "env",
    "envFrom",
    "imagePullPolicy",
    "lifecycle",
    "livenessProbe",
    "name",
    "readinessProbe",
    "securityContext",
    "startupProbe",
    "stdin",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "volumeDevices",
    "volumeMounts",
    "workingDir",
}
ENGINE_MODELLED = {
    "image": "image",
    "command": "engine and extra_args",
    "args": "extra_args (and the fields Tandem renders flags from)",
    "resources": "accelerator_resource, accelerator_count, cpu and memory",
    "ports": "port and connector ports",
}
# Label keys Tandem and Kthena set on pod templates (selection and routing depend on them).
OWNED_LABEL_PREFIXES = ("tandem.io/", "app.kubernetes.io/managed-by", "modelserving.volcano.sh/")


class _Checker:
    def __init__(self, path: str) -> None:
        self.path = path
        self.errors: dict[str, list[str]] = {}

    def err(self, where: str, message: str) -> None:
        self.errors.setdefault(f"{self.path}.{where}" if where else self.path, []).append(message)

    def named_list(
        self, value: Any, where: str, *, key: str = "name", image: bool = False, dns: bool = True
    ) -> None:
        if not isinstance(value, list):
            self.err(where, "must be a list of objects")
            return
        seen: set[str] = set()
        for i, item in enumerate(value):
            name = item.get(key) if isinstance(item, dict) else None
            if not isinstance(name, str) or not name:
                self.err(f"{where}[{i}]", f"must be an object with a {key}")
                continue
            if dns and key == "name" and not DNS_LABEL.match(name):
                self.err(f"{where}[{i}].name", f"{name[:40]!r} is not a DNS label (lower-case, digits, '-')")
            if name in seen:
                self.err(f"{where}[{name}]", f"{key} {name!r} appears twice; keep one")
            seen.add(name)
            if image and not isinstance(item.get("image"), str):
                self.err(f"{where}[{name}].image", "is required: the container's image")

    def str_map(self, value: Any, where: str, *, labels: bool) -> None:
        if not isinstance(value, dict):
            self.err(where, "must be an object of strings")
            return
        for k, v in value.items():
            if not isinstance(k, str) or not LABEL_KEY.match(k):
                self.err(where, f"{str(k)[:60]!r} is not a valid key (e.g. example.com/team)")
            elif labels and k.startswith(OWNED_LABEL_PREFIXES):
                self.err(f"{where}.{k}", "is set by Tandem or Kthena (selection depends on it); remove it")
            if not isinstance(v, str) or (labels and not LABEL_VALUE.match(v)):
                self.err(f"{where}.{k}", "must be a string (a label value: ≤63 letters, digits, '-_.')")


def check(raw: Any, path: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The overlay as stored (a plain JSON object), and its problems by field path."""
    c = _Checker(path)
    if raw is None or raw == {}:
        return {}, {}
    if not isinstance(raw, dict):
        c.err("", "must be an object with metadata, spec and/or engine")
        return {}, c.errors
    try:
        text = json.dumps(raw, sort_keys=True)
    except (TypeError, ValueError):
        c.err("", "must hold JSON values only (objects, lists, strings, numbers, true/false, null)")
        return {}, c.errors
    if len(text) > MAX_BYTES:
        c.err("", f"is {len(text)} bytes; keep it under {MAX_BYTES} (move large files into a ConfigMap)")
        return {}, c.errors
    for key in sorted(set(raw) - {"metadata", "spec", "engine"}):
        c.err(str(key), "is not an overlay section; use metadata, spec or engine")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, dict):
        c.err("metadata", "must be an object with labels and/or annotations")
        meta = {}
    for key in sorted(set(meta) - {"labels", "annotations"}):
        c.err(f"metadata.{key}", "a pod template's metadata takes labels and annotations only")
    if "labels" in meta:
        c.str_map(meta["labels"], "metadata.labels", labels=True)
    if "annotations" in meta:
        c.str_map(meta["annotations"], "metadata.annotations", labels=False)
    pod = raw.get("spec") or {}
    if not isinstance(pod, dict):
        c.err("spec", "must be an object of pod spec fields")
        pod = {}
    for key in sorted(pod):
        if key in POD_MODELLED:
            c.err(f"spec.{key}", f"is modelled by the spec; set {POD_MODELLED[key]} instead")
        elif key not in POD_FIELDS:
            c.err(f"spec.{key}", "is not a pod spec field Tandem carries; check its spelling (camelCase)")
    for key in ("initContainers", "containers"):
        if key in pod:
            c.named_list(pod[key], f"spec.{key}", image=True)
    if "volumes" in pod:
        c.named_list(pod["volumes"], "spec.volumes")
    engine = raw.get("engine") or {}
    if not isinstance(engine, dict):
        c.err("engine", "must be an object of container fields")
        engine = {}
    for key in sorted(engine):
        if key in ENGINE_MODELLED:
            c.err(f"engine.{key}", f"is modelled by the spec; set {ENGINE_MODELLED[key]} instead")
        elif key not in ENGINE_FIELDS:
            c.err(f"engine.{key}", "is not a container field Tandem carries; check its spelling (camelCase)")
    if "name" in engine and (not isinstance(engine["name"], str) or not DNS_LABEL.match(engine["name"])):
        c.err("engine.name", "must be a DNS label, e.g. vllm")
    if "env" in engine:
        c.named_list(engine["env"], "engine.env", dns=False)
        for item in engine["env"] if isinstance(engine["env"], list) else []:
            if isinstance(item, dict) and not ENV_NAME.match(str(item.get("name", ""))):
                c.err(f"engine.env[{item.get('name')}]", "is not an env name (letters, digits, '_')")
    if "volumeMounts" in engine:
        c.named_list(engine["volumeMounts"], "engine.volumeMounts", key="mountPath")
    mounted = {m.get("name") for m in engine.get("volumeMounts") or [] if isinstance(m, dict)}
    for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
        if isinstance(container, dict):
            mounted |= {m.get("name") for m in container.get("volumeMounts") or [] if isinstance(m, dict)}
    declared = {v.get("name") for v in pod.get("volumes") or [] if isinstance(v, dict)}
    rendered = {"shm", "hccn-config", "tandem-config"}
    for name in sorted(str(n) for n in mounted - declared - rendered - {None}):
        c.err("spec.volumes", f"has no volume {name!r}, which a container mounts; add it or remove the mount")
    if c.errors:
        return {}, c.errors
    return json.loads(text), {}
