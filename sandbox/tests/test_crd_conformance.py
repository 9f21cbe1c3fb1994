"""The Kthena CRDs the sandbox carries are byte-identical to the upstream files in ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.apiserver.resources import CRDS_DIR, load_crd_documents, resource_type_from_crd

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO.parent / "shared" / "reference" / "kthena" / "crds"
EXAMPLES = REPO.parent / "shared" / "reference" / "kthena" / "examples"
COPIED_EXAMPLES = Path(__file__).parent / "data"


def _upstream_dir() -> Path:
    if not UPSTREAM.is_dir():
        pytest.fail(
            f"the upstream Kthena CRDs are expected at {UPSTREAM} (CI checks out ../shared beside the repo)"
        )
    return UPSTREAM


def test_every_upstream_crd_is_carried_byte_for_byte():
    upstream = {p.name: p.read_bytes() for p in _upstream_dir().glob("*.yaml")}
    carried = {p.name: p.read_bytes() for p in CRDS_DIR.glob("*.yaml")}
    assert sorted(carried) == sorted(upstream)
    for name, content in upstream.items():
        assert carried[name] == content, f"sandbox/crds/{name} differs from the upstream file"


def test_copied_examples_match_upstream():
    for copied in COPIED_EXAMPLES.glob("*.yaml"):
        upstream = EXAMPLES / copied.name
        assert upstream.is_file(), f"{copied.name} has no upstream counterpart in {EXAMPLES}"
        assert copied.read_bytes() == upstream.read_bytes()


def test_carried_crds_define_the_kinds_the_sandbox_serves():
    types = {resource_type_from_crd(doc).kind: resource_type_from_crd(doc) for doc in load_crd_documents()}
    assert {"ModelServing", "ModelServer", "ModelRoute", "AutoscalingPolicy"} <= set(types)
    serving = types["ModelServing"]
    assert serving.scale is not None and serving.scale.spec_replicas == ".spec.replicas"
    assert serving.status and serving.schema is not None
