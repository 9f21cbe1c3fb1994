"""Shared test data for the topologies app: presets as parsed specs, a cluster row, CRD schemas."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from topologies.presets import PRESETS, preset_spec
from topologies.spec import TopologySpec

REPO = Path(__file__).resolve().parents[2]
PROJECT_CRDS = REPO / "sandbox" / "crds"
UPSTREAM_CRDS = REPO.parent / "shared" / "reference" / "kthena" / "crds"


@functools.cache
def crd_schemas(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → openAPIV3Schema for every CRD file in the directory (parsed once)."""
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=loader):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
            for version in doc["spec"]["versions"]:
                schemas[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return schemas


def spec_of(key: str, **overrides: Any) -> TopologySpec:
    return TopologySpec.from_dict(preset_spec(key, **overrides))


@pytest.fixture
def preset_keys() -> list[str]:
    return list(PRESETS)


@pytest.fixture
def cluster(db):  # type: ignore[no-untyped-def]
    from clusters.models import AuthMethod, Cluster

    return Cluster.objects.create(name="lab", auth_method=AuthMethod.TOKEN, server="https://127.0.0.1:1")


@pytest.fixture
def other_cluster(db):  # type: ignore[no-untyped-def]
    from clusters.models import AuthMethod, Cluster

    return Cluster.objects.create(name="lab-b", auth_method=AuthMethod.TOKEN, server="https://127.0.0.1:2")
