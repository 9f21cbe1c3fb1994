"""Defaults the API server fills into built-in kinds on create (the ones clients read back)."""

from __future__ import annotations

from typing import Any

from kube.quantity import QuantityError, canonical


def _canonical_resources(container: dict[str, Any]) -> None:
    """Requests and limits are stored in canonical form, as the real API server re-serialises every
    Quantity (``1.5`` → ``1500m``, ``0.5Gi`` → ``512Mi``); a client reading them back sees that form."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return
    for section in ("requests", "limits"):
        values = resources.get(section)
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            try:
                values[name] = canonical(value)
            except QuantityError:
                continue  # left for validation to refuse with the API server's message


def _container_defaults(container: dict[str, Any]) -> None:
    image = str(container.get("image", ""))
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    container.setdefault("imagePullPolicy", "Always" if tag in ("", "latest") else "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    _canonical_resources(container)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def pod_spec_defaults(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        _container_defaults(container)


def _workload_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    template = spec.setdefault("template", {})
    pod_spec_defaults(template.setdefault("spec", {}))
    template.setdefault("metadata", {}).setdefault("creationTimestamp", None)


def apply_builtin_defaults(plural: str, obj: dict[str, Any]) -> None:
    if plural == "pods":
        pod_spec_defaults(obj.setdefault("spec", {}))
    elif plural == "deployments":
        _workload_defaults(obj)
        spec = obj["spec"]
        spec.setdefault(
            "strategy",
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        )
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    elif plural == "replicasets":
        _workload_defaults(obj)
    elif plural == "services":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    elif plural == "secrets":
        if not obj.get("type"):
            obj["type"] = "Opaque"
    elif plural == "namespaces":
        name = obj.get("metadata", {}).get("name")
        if name:
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")


def carry_allocated(plural: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Values the server allocated (a Service's cluster IP) survive an update that leaves them out."""
    if plural == "services":
        old_spec, new_spec = old.get("spec") or {}, new.setdefault("spec", {})
        for key in ("clusterIP", "clusterIPs"):
            if key in old_spec and not new_spec.get(key):
                new_spec[key] = old_spec[key]
