"""Adoption: the Kthena ModelServings and labelled plain Deployments on a cluster that Tandem does not
manage, read as topologies; their live objects become revision 1 as they run (no pod restarts).

``adoptable(conn)`` lists candidates (each with its import preview); ``candidate_objects`` reads one
candidate's objects fresh; ``owned_manifests`` are those objects with Tandem's labels on the objects
themselves (never on pod templates, which would replace the pods); ``pod_selector_of`` finds its pods.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

import kube
from kube import labels
from topologies.importing import ImportResult, import_manifests
from topologies.importing.plain import role_of

SERVING = ("workload.serving.volcano.sh/v1alpha1", "ModelServing")
SERVER = ("networking.serving.volcano.sh/v1alpha1", "ModelServer")
ROUTE = ("networking.serving.volcano.sh/v1alpha1", "ModelRoute")
DEPLOYMENT = ("apps/v1", "Deployment")
SERVICE = ("v1", "Service")
SERVER_SET_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")


@dataclass
class Candidate:
    kind: str  # ModelServing | Deployment
    namespace: str
    name: str  # the ModelServing's name, or the Deployments' shared base name
    objects: list[dict[str, Any]]
    result: ImportResult

    def as_dict(self) -> dict[str, Any]:
        report = self.result.report.as_dict()
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "objects": [f"{o['kind']}/{o['metadata']['name']}" for o in self.objects],
            "ok": self.result.ok,
            "errors": self.result.errors,
            "spec": self.result.spec,
            "report": report,
        }


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as one would apply it: no status and no fields the API server sets itself."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.setdefault("metadata", {})
    for key in SERVER_SET_META:
        meta.pop(key, None)
    return out


def _managed(obj: dict[str, Any]) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(labels.MANAGED_BY) == labels.MANAGED_BY_VALUE


def _list(conn: kube.ClusterConnection, kind: tuple[str, str], namespace: str | None) -> list[dict[str, Any]]:
    try:
        return kube.list_objects(conn, kind[0], kind[1], namespace)
    except (kube.KubeNotFound, kube.KubeNotInstalled):
        return []  # the kind is not installed (no Kthena)


def _kthena_set(conn: kube.ClusterConnection, serving: dict[str, Any]) -> list[dict[str, Any]]:
    namespace = serving["metadata"].get("namespace") or "default"
    name = serving["metadata"]["name"]
    servers = [
        s
        for s in _list(conn, SERVER, namespace)
        if ((s.get("spec") or {}).get("workloadSelector") or {})
        .get("matchLabels", {})
        .get(labels.KTHENA_NAME)
        == name
    ]
    names = {s["metadata"]["name"] for s in servers}
    routes = [
        r
        for r in _list(conn, ROUTE, namespace)
        if any(
            t.get("modelServerName") in names
            for rule in (r.get("spec") or {}).get("rules") or []
            for t in rule.get("targetModels") or []
        )
    ]
    return [clean(o) for o in (serving, *servers, *routes)]


def _base(name: str) -> str:
    for suffix in ("-prefill", "-decode"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _deployment_sets(deployments: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    sets: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in deployments:
        if _managed(d) or role_of_labels(d) not in ("prefill", "decode"):
            continue
        meta = d["metadata"]
        sets.setdefault((meta.get("namespace") or "default", _base(meta["name"])), []).append(clean(d))
    return sets


def role_of_labels(deployment: dict[str, Any]) -> str:
    """A Deployment is a candidate only when a label says its role (the name alone is not enough)."""
    meta = deployment.get("metadata") or {}
    template = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
    for source in (meta.get("labels") or {}, template.get("labels") or {}):
        if any(
            source.get(k) in ("prefill", "decode")
            for k in (labels.ROLE, labels.KTHENA_ROLE, "role", "app.kubernetes.io/component")
        ):
            return role_of(deployment)
    return ""


def _preview(objects: list[dict[str, Any]]) -> ImportResult:
    return import_manifests(yaml.safe_dump_all(objects, sort_keys=False))


def adoptable(conn: kube.ClusterConnection) -> list[Candidate]:
    out: list[Candidate] = []
    for serving in _list(conn, SERVING, None):
        if _managed(serving):
            continue
        objects = _kthena_set(conn, serving)
        meta = serving["metadata"]
        out.append(
            Candidate(
                "ModelServing", meta.get("namespace") or "default", meta["name"], objects, _preview(objects)
            )
        )
    for (namespace, name), objects in sorted(_deployment_sets(_list(conn, DEPLOYMENT, None)).items()):
        out.append(Candidate("Deployment", namespace, name, objects, _preview(objects)))
    return out


def candidate_objects(
    conn: kube.ClusterConnection, *, kind: str, namespace: str, name: str
) -> list[dict[str, Any]]:
    """One candidate's objects, read now; empty when it is gone or Tandem already manages it."""
    if kind == "ModelServing":
        serving = kube.get_object(conn, SERVING[0], SERVING[1], namespace, name)
        return [] if serving is None or _managed(serving) else _kthena_set(conn, serving)
    sets = _deployment_sets(_list(conn, DEPLOYMENT, namespace))
    return sets.get((namespace, name), [])


def pod_selector_of(objects: list[dict[str, Any]]) -> str:
    """A label selector matching the candidate's pods (and no others of its namespace)."""
    for obj in objects:
        if obj["kind"] == "ModelServing":
            return f"{labels.KTHENA_NAME}={obj['metadata']['name']}"
    selectors = [
        ((o.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        for o in objects
        if o["kind"] == "Deployment"
    ]
    if not selectors:
        return ""
    common = {k: v for k, v in selectors[0].items() if all(s.get(k) == v for s in selectors)}
    if common:
        return ",".join(f"{k}={v}" for k, v in sorted(common.items()))
    shared = sorted(set.intersection(*(set(s) for s in selectors)))
    if shared:
        key = shared[0]
        return f"{key} in ({','.join(sorted({s[key] for s in selectors}))})"
    return ""


def owned_manifests(objects: list[dict[str, Any]], *, topology_id: int) -> list[dict[str, Any]]:
    """The objects with Tandem's labels on each object's own metadata (pod templates untouched)."""
    out = []
    for obj in objects:
        owned = copy.deepcopy(obj)
        meta = owned.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), **labels.topology_labels(topology_id, 1)}
        out.append(owned)
    return out


def release_body(obj: dict[str, Any]) -> dict[str, Any]:
    """An apply of nothing: Tandem gives up every field it owned alone (its labels); shared ones stay."""
    meta = obj.get("metadata") or {}
    body: dict[str, Any] = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {"name": meta["name"]},
    }
    if meta.get("namespace"):
        body["metadata"]["namespace"] = meta["namespace"]
    return body


def unreadable(cluster_id: int, message: str) -> dict[str, Any]:
    """A row for a cluster whose workloads could not be listed (so the list never hides a cluster)."""
    return {
        "cluster": cluster_id,
        "kind": "",
        "namespace": "",
        "name": "",
        "objects": [],
        "ok": False,
        "errors": {"cluster": [message]},
        "spec": {},
        "report": {"mapped": [], "verbatim": [], "unsupported": [], "changed": [], "questions": []},
    }
