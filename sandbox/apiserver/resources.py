"""The resource types the server knows: built-in kinds plus those defined by installed CRDs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CRDS_DIR = Path(__file__).resolve().parent.parent / "crds"
# CRDs of other projects a cluster running Kthena often has beside it (KEDA's ScaledObject), written for the
# sandbox from their published schemas; CRDS_DIR itself holds Kthena's, byte for byte as upstream.
ECOSYSTEM_CRDS_DIR = CRDS_DIR / "ecosystem"


@dataclass(frozen=True)
class ScalePaths:
    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = ".status.selector"


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    status: bool = False  # has a /status subresource
    scale: ScalePaths | None = None
    log: bool = False
    custom: bool = False
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def _rt(group: str, version: str, plural: str, kind: str, **kw: Any) -> ResourceType:
    return ResourceType(group=group, version=version, plural=plural, singular=kind.lower(), kind=kind, **kw)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _rt("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",), status=True),
    _rt("", "v1", "nodes", "Node", namespaced=False, short_names=("no",), status=True),
    _rt("", "v1", "pods", "Pod", short_names=("po",), categories=("all",), status=True, log=True),
    _rt("", "v1", "services", "Service", short_names=("svc",), categories=("all",), status=True),
    _rt("", "v1", "endpoints", "Endpoints", short_names=("ep",)),
    _rt("", "v1", "events", "Event", short_names=("ev",)),
    _rt("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _rt("", "v1", "secrets", "Secret"),
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), status=True),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _rt(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        categories=("all",),
        status=True,
        scale=ScalePaths(label_selector=None),
    ),
    _rt(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        short_names=("rs",),
        categories=("all",),
        status=True,
        scale=ScalePaths(label_selector=None),
    ),
    _rt(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short_names=("hpa",),
        categories=("all",),
        status=True,
    ),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        verbs=("get", "list", "watch"),
        status=True,
    ),
    _rt(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        namespaced=False,
        verbs=("create",),
    ),
    _rt(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        namespaced=False,
        verbs=("create",),
    ),
)


def load_crd_documents(directory: Path = CRDS_DIR) -> list[dict[str, Any]]:
    """The CRD objects the sandbox installs, read from the YAML files the project carries.

    Parsing the 17k-line ModelServing schema takes a while, so the parsed form is cached as
    JSON in the temp directory, keyed by a hash of the files' bytes.
    """
    paths = sorted(directory.glob("*.yaml"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:20]
    cache = Path(tempfile.gettempdir()) / f"tandem-sandbox-crds-{digest}.json"
    with contextlib.suppress(OSError, ValueError):
        cached: list[dict[str, Any]] = json.loads(cache.read_text())
        return cached
    documents: list[dict[str, Any]] = []
    for path in paths:
        for doc in yaml.load_all(path.read_text(), Loader=_LOADER):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                documents.append(doc)
    with contextlib.suppress(OSError, TypeError):
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(documents))
        os.replace(partial, cache)
    return documents


def resource_type_from_crd(crd: dict[str, Any]) -> ResourceType:
    spec = crd["spec"]
    names = spec["names"]
    version = next(v for v in spec["versions"] if v.get("served", True) and v.get("storage", True))
    subresources = version.get("subresources") or {}
    scale = None
    if "scale" in subresources:
        sc = subresources["scale"]
        scale = ScalePaths(
            spec_replicas=sc["specReplicasPath"],
            status_replicas=sc["statusReplicasPath"],
            label_selector=sc.get("labelSelectorPath"),
        )
    return ResourceType(
        group=spec["group"],
        version=version["name"],
        plural=names["plural"],
        singular=names.get("singular", names["kind"].lower()),
        kind=names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames", ())),
        categories=tuple(names.get("categories", ())),
        status="status" in subresources,
        scale=scale,
        custom=True,
        schema=(version.get("schema") or {}).get("openAPIV3Schema"),
        printer_columns=tuple(version.get("additionalPrinterColumns", ())),
    )


class Registry:
    """Lookup of resource types by group/version/plural, and the groups discovery lists."""

    def __init__(self, types: list[ResourceType]) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_key: dict[tuple[str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._by_key[rt.key] = rt
        self._by_kind[(rt.api_version, rt.kind)] = rt

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_key(self, group: str, plural: str) -> ResourceType:
        return self._by_key[(group, plural)]

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def types(self) -> list[ResourceType]:
        return list(self._by_path.values())

    def groups(self) -> dict[str, list[str]]:
        """Group name → served versions (the core group is left out: it lives under /api)."""
        groups: dict[str, list[str]] = {}
        for rt in self._by_path.values():
            if rt.group:
                versions = groups.setdefault(rt.group, [])
                if rt.version not in versions:
                    versions.append(rt.version)
        return groups

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._by_path.values() if rt.group == group and rt.version == version]
