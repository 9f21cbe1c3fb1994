"""Rendered manifests for the seed scenarios match the reviewed golden files.

Regenerate after an intended change with ``UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from topologies.render import render, to_yaml
from topologies.tests.conftest import spec_of

GOLDEN = Path(__file__).parent / "golden"
SCENARIOS = {
    "deepseek-ascend-mooncake-kthena": ("deepseek-ascend-mooncake", {}),
    "qwen-gpu-nixl-kthena": ("qwen-gpu-nixl", {}),
    "qwen-sglang-mooncake-kthena": ("qwen-sglang-mooncake", {}),
    "qwen-gpu-nixl-deployments": ("qwen-gpu-nixl", {"backend": "deployments"}),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_rendered_manifests_match_golden_file(scenario: str) -> None:
    key, overrides = SCENARIOS[scenario]
    text = to_yaml(render(spec_of(key, **overrides), topology_id=7, revision=3))
    path = GOLDEN / f"{scenario}.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path.name}; run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{scenario} changed; if intended, regenerate with UPDATE_GOLDEN=1"


def test_rendering_is_deterministic() -> None:
    spec = spec_of("deepseek-ascend-mooncake")
    assert to_yaml(render(spec, topology_id=1, revision=1)) == to_yaml(
        render(spec, topology_id=1, revision=1)
    )
