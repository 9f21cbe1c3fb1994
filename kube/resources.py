"""Objects by apiVersion/kind: get, list, server-side apply, delete, scale, read-modify-write updates.

Built-in kinds resolve from a table; any other kind (Kthena's CRDs) through API discovery, cached per
cluster. A group/version the cluster does not serve raises KubeNotInstalled.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kube.client import ClusterConnection, request
from kube.errors import KubeError, KubeInvalid, KubeNotFound, KubeNotInstalled
from kube.labels import FIELD_MANAGER, MANAGED_BY, MANAGED_BY_VALUE


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.split("/")[0] if "/" in self.api_version else ""

    def collection_path(self, namespace: str | None) -> str:
        prefix = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def object_path(self, namespace: str | None, name: str) -> str:
        return f"{self.collection_path(namespace)}/{name}"


_BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Service"): ("services", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "Event"): ("events", True),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "Endpoints"): ("endpoints", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("apps/v1", "DaemonSet"): ("daemonsets", True),
    ("apps/v1", "ReplicaSet"): ("replicasets", True),
    ("batch/v1", "Job"): ("jobs", True),
    ("events.k8s.io/v1", "Event"): ("events", True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("networking.k8s.io/v1", "Ingress"): ("ingresses", True),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): ("horizontalpodautoscalers", True),
}

# Discovery answers per (cluster id, credential version, apiVersion): {kind: Resource}; refreshed on a miss.
_DISCOVERY_TTL = 300.0
_discovery: dict[tuple[int, str, str], tuple[float, dict[str, Resource]]] = {}
_discovery_lock = threading.Lock()


def _discover(conn: ClusterConnection, api_version: str) -> dict[str, Resource]:
    path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    response = request(conn, "GET", path, action=f"discover {api_version}", allow=(404,))
    if response.status == 404:
        return {}
    found: dict[str, Resource] = {}
    for item in (response.json() or {}).get("resources", []):
        name = str(item.get("name", ""))
        if not name or "/" in name:
            continue
        found[str(item.get("kind"))] = Resource(
            api_version, str(item.get("kind")), name, bool(item.get("namespaced"))
        )
    return found


def resolve(conn: ClusterConnection, api_version: str, kind: str) -> Resource:
    """Where ``kind`` lives on this cluster; KubeNotInstalled when the cluster does not serve it."""
    builtin = _BUILTIN.get((api_version, kind))
    if builtin is not None:
        return Resource(api_version, kind, builtin[0], builtin[1])
    key = (conn.cluster_id, conn.credential_version, api_version)
    now = time.monotonic()
    with _discovery_lock:
        cached = _discovery.get(key)
    if cached is not None and now - cached[0] < _DISCOVERY_TTL and kind in cached[1]:
        return cached[1][kind]
    resources = _discover(conn, api_version)
    with _discovery_lock:
        _discovery[key] = (now, resources)
    if kind not in resources:
        who = f"cluster `{conn.cluster_name}`" if conn.cluster_name else "the cluster"
        hint = (
            " — install Kthena (its CRDs) or use the plain Deployments backend"
            if "volcano.sh" in (api_version)
            else ""
        )
        raise KubeNotInstalled(
            f"{who} does not serve {kind} ({api_version}){hint}", status=404, reason="NotInstalled"
        )
    return resources[kind]


def forget_discovery(cluster_id: int) -> None:
    with _discovery_lock:
        for key in [k for k in _discovery if k[0] == cluster_id]:
            del _discovery[key]


def _describe(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def get_object(
    conn: ClusterConnection, api_version: str, kind: str, namespace: str | None, name: str
) -> dict[str, Any] | None:
    """The live object, or None when it does not exist."""
    res = resolve(conn, api_version, kind)
    response = request(
        conn,
        "GET",
        res.object_path(namespace, name),
        allow=(404,),
        action=f"read {_describe(kind, namespace, name)}",
    )
    if response.status == 404:
        return None
    obj: dict[str, Any] = response.json()
    return obj


def list_objects(
    conn: ClusterConnection, api_version: str, kind: str, namespace: str | None, label_selector: str = ""
) -> list[dict[str, Any]]:
    """Objects of a kind (in one namespace, or everywhere when ``namespace`` is None)."""
    res = resolve(conn, api_version, kind)
    where = f" in {namespace}" if namespace else ""
    response = request(
        conn,
        "GET",
        res.collection_path(namespace),
        query={"labelSelector": label_selector},
        action=f"list {res.plural}{where}",
    )
    items = (response.json() or {}).get("items") or []
    for item in items:
        item.setdefault("apiVersion", api_version)
        item.setdefault("kind", kind)
    return list(items)


# Lower rank applies first: namespaces and CRDs, then what workloads mount or reference, then workloads,
# then Kthena's routing layers which point at the workloads.
_APPLY_RANK = {
    "Namespace": 0,
    "CustomResourceDefinition": 1,
    "ServiceAccount": 2,
    "Secret": 3,
    "ConfigMap": 3,
    "Role": 4,
    "ClusterRole": 4,
    "RoleBinding": 5,
    "ClusterRoleBinding": 5,
    "PersistentVolumeClaim": 6,
    "Service": 7,
    "Deployment": 8,
    "StatefulSet": 8,
    "DaemonSet": 8,
    "Job": 8,
    "ModelServing": 9,
    "ModelServer": 10,
    "ModelRoute": 11,
    "PodDisruptionBudget": 12,
}


def apply_order(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dependency order for applying (stable for equal ranks); delete in the reverse."""
    return sorted(objects, key=lambda o: _APPLY_RANK.get(str(o.get("kind")), 9))


def owned_by_tandem(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == MANAGED_BY_VALUE


def apply_objects(
    conn: ClusterConnection, objects: list[dict[str, Any]], *, force: bool = True
) -> list[dict[str, Any]]:
    """Server-side apply (field manager ``tandem``) each object in dependency order; returns live objects.

    Conflicts are forced only for objects carrying Tandem's managed-by label, so a field another manager
    owns on an object Tandem does not own stays a KubeConflict naming that manager.
    """
    applied = []
    for obj in apply_order(objects):
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        meta = obj.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace")
        if not api_version or not kind or not name:
            raise KubeInvalid(
                "an object to apply needs apiVersion, kind and metadata.name",
                causes=[("metadata.name", "required")],
                status=None,
            )
        res = resolve(conn, api_version, kind)
        if res.namespaced and not namespace:
            raise KubeInvalid(
                f"{kind} {name} needs metadata.namespace",
                causes=[("metadata.namespace", "required")],
                status=None,
            )
        response = request(
            conn,
            "PATCH",
            res.object_path(namespace if res.namespaced else None, str(name)),
            query={
                "fieldManager": FIELD_MANAGER,
                "force": "true" if force and owned_by_tandem(obj) else None,
            },
            body=json.dumps(obj),
            content_type="application/apply-patch+yaml",
            action=f"apply {_describe(kind, namespace, str(name))}",
        )
        applied.append(response.json())
    return applied


def delete_object(
    conn: ClusterConnection, api_version: str, kind: str, namespace: str | None, name: str
) -> bool:
    """Delete in the background (dependents follow); False when the object was already gone."""
    res = resolve(conn, api_version, kind)
    response = request(
        conn,
        "DELETE",
        res.object_path(namespace, name),
        body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        allow=(404,),
        action=f"delete {_describe(kind, namespace, name)}",
    )
    return response.status != 404


def scale(
    conn: ClusterConnection, api_version: str, kind: str, namespace: str, name: str, replicas: int
) -> None:
    """Set replicas through the ``scale`` subresource (field manager ``tandem``, as every Tandem write)."""
    if replicas < 0:
        raise KubeInvalid(
            "replicas must be 0 or more", causes=[("spec.replicas", "must be >= 0")], status=None
        )
    res = resolve(conn, api_version, kind)
    request(
        conn,
        "PATCH",
        res.object_path(namespace, name) + "/scale",
        query={"fieldManager": FIELD_MANAGER},
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
        action=f"scale {_describe(kind, namespace, name)} to {replicas}",
    )


def update_object(
    conn: ClusterConnection,
    api_version: str,
    kind: str,
    namespace: str | None,
    name: str,
    mutate: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """Read-modify-write with optimistic concurrency: on 409 the object is re-read and ``mutate`` re-run."""
    res = resolve(conn, api_version, kind)
    path = res.object_path(namespace, name)
    what = _describe(kind, namespace, name)

    def fresh_body() -> dict[str, Any]:
        current = request(conn, "GET", path, action=f"read {what}").json()
        return mutate(current)

    try:
        body = fresh_body()
    except KubeNotFound:
        raise
    response = request(
        conn,
        "PUT",
        path,
        query={"fieldManager": FIELD_MANAGER},
        body=body,
        action=f"update {what}",
        on_conflict=fresh_body,
    )
    result: dict[str, Any] = response.json()
    return result


__all__ = [
    "KubeError",
    "Resource",
    "apply_objects",
    "apply_order",
    "delete_object",
    "get_object",
    "list_objects",
    "resolve",
    "scale",
    "update_object",
]
