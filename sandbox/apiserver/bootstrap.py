"""What exists in a fresh cluster: system namespaces and the installed CustomResourceDefinitions."""

from __future__ import annotations

import copy
from typing import Any

from sandbox.apiserver.objects import Api, now_iso
from sandbox.apiserver.resources import ECOSYSTEM_CRDS_DIR, load_crd_documents, resource_type_from_crd

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
MANAGER = "kube-apiserver"


def create_namespaces(api: Api) -> None:
    rt = api.registry.by_key("", "namespaces")
    for name in SYSTEM_NAMESPACES:
        api.create(
            rt,
            "",
            {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}},
            manager=MANAGER,
        )


def install_crds(api: Api) -> list[str]:
    """Register the CRDs the project carries and store them as CRD objects; returns their names."""
    rt = api.registry.by_key("apiextensions.k8s.io", "customresourcedefinitions")
    names = []
    for doc in load_crd_documents() + load_crd_documents(ECOSYSTEM_CRDS_DIR):
        api.registry.add(resource_type_from_crd(doc))
        crd: dict[str, Any] = copy.deepcopy(doc)
        crd["status"] = _established(doc)
        names.append(api.create(rt, "", crd, manager=MANAGER)["metadata"]["name"])
    return names


def _established(crd: dict[str, Any]) -> dict[str, Any]:
    names = crd["spec"]["names"]
    now = now_iso()
    return {
        "acceptedNames": {k: names[k] for k in ("kind", "listKind", "plural", "singular") if k in names},
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": now,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": now,
            },
        ],
        "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
    }
