"""Pod templates follow what a role runs, not the revision: a change to one role rolls that role only."""

from __future__ import annotations

from typing import Any

import pytest

from topologies.presets import preset_spec
from topologies.render import render
from topologies.render.podtemplate import role_config_files
from topologies.spec import TopologySpec
from topologies.tests.conftest import spec_of

BACKENDS = ("kthena", "deployments")


def _with_role(key: str, backend: str, role: str, **changes: Any) -> TopologySpec:
    data = preset_spec(key, backend=backend)
    data["roles"][role].update(changes)
    return TopologySpec.from_dict(data)


def _templates(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Role → its pod template, for either backend."""
    out: dict[str, dict[str, Any]] = {}
    for obj in objects:
        if obj["kind"] == "ModelServing":
            for role in obj["spec"]["template"]["roles"]:
                out[role["name"]] = role["entryTemplate"]
        elif obj["kind"] == "Deployment":
            template = obj["spec"]["template"]
            out[template["metadata"]["labels"]["tandem.io/role"]] = template
    return out


def _hashes(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {
        role: t["metadata"]["labels"]["tandem.io/template-hash"] for role, t in _templates(objects).items()
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_revision_of_the_same_spec_keeps_every_pod_template(backend: str) -> None:
    spec = spec_of("deepseek-ascend-mooncake", backend=backend)
    first = render(spec, topology_id=4, revision=1)
    second = render(spec, topology_id=4, revision=2)
    assert _templates(first) == _templates(second)
    assert {o["metadata"]["labels"]["tandem.io/revision"] for o in second} == {"2"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_scaling_decode_changes_only_its_replica_count(backend: str) -> None:
    one = spec_of("deepseek-ascend-mooncake", backend=backend)
    two = _with_role("deepseek-ascend-mooncake", backend, "decode", replicas=2)
    assert two.decode.replicas == 2 and two.prefill == one.prefill
    before, after = render(one, topology_id=4, revision=1), render(two, topology_id=4, revision=2)
    assert _templates(before) == _templates(after)
    if backend == "kthena":
        [serving] = [o for o in after if o["kind"] == "ModelServing"]
        assert {r["name"]: r["replicas"] for r in serving["spec"]["template"]["roles"]} == {
            "prefill": 1,
            "decode": 2,
        }
        assert serving["spec"]["rolloutStrategy"] == {"type": "RoleRollingUpdate"}
    else:
        replicas = {o["metadata"]["name"]: o["spec"]["replicas"] for o in after if o["kind"] == "Deployment"}
        assert replicas[f"{two.name}-decode"] == 2 and replicas[f"{two.name}-prefill"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_extra_argument_on_prefill_changes_the_prefill_template_only(backend: str) -> None:
    base = spec_of("qwen-gpu-nixl", backend=backend)
    changed = _with_role("qwen-gpu-nixl", backend, "prefill", extra_args=["--max-model-len", "8192"])
    before = _hashes(render(base, topology_id=4, revision=1))
    after = _hashes(render(changed, topology_id=4, revision=2))
    assert after["prefill"] != before["prefill"]
    assert after["decode"] == before["decode"]
    if backend == "deployments":
        assert after["router"] == before["router"]


def test_mindie_roles_hash_their_own_server_config_only() -> None:
    datadist = {
        "type": "llm-datadist",
        "prefill_cluster_id": 1,
        "decode_cluster_id": 2,
        "cache_desc": {"num_tensors": 54, "shape": [2048, 128, 1, 576], "dtype": "bfloat16"},
    }
    spec = spec_of("deepseek-ascend-mooncake", engine="mindie", connector=datadist)
    assert set(role_config_files(spec, "prefill")) == {"mindie-prefill.json"}
    assert set(role_config_files(spec, "decode")) == {"mindie-decode.json"}
    assert role_config_files(spec_of("qwen-gpu-nixl"), "decode") == {}
