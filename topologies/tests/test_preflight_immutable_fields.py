"""Preflight says before a deploy that an object whose immutable field changes is deleted and recreated."""

from __future__ import annotations

from topologies.preflight import ClusterFacts, NodeFacts, run_preflight
from topologies.presets import preset_spec
from topologies.render import kthena
from topologies.spec import TopologySpec

GPU = "nvidia.com/gpu"
FACTS = ClusterFacts(
    crds=frozenset(kthena.REQUIRED_CRDS),
    nodes=tuple(NodeFacts(name=f"n{i}", allocatable={GPU: 8}) for i in range(4)),
)


def _spec(model_name: str) -> TopologySpec:
    raw = preset_spec("qwen-gpu-nixl")
    raw["routing"] = {**(raw.get("routing") or {}), "model_name": model_name}
    return TopologySpec.from_dict(raw)


def test_a_new_served_model_name_warns_that_the_model_route_is_recreated():
    findings = run_preflight(_spec("qwen-renamed"), FACTS, deployed=_spec("qwen"))
    recreated = [f for f in findings if f.code == "recreated_object"]
    assert len(recreated) == 1 and not recreated[0].blocking
    assert recreated[0].field == "routing.model_name"
    assert "ModelRoute/" in recreated[0].message and "'qwen' → 'qwen-renamed'" in recreated[0].message


def test_the_same_model_name_or_a_first_deploy_warns_nothing():
    assert not [
        f for f in run_preflight(_spec("qwen"), FACTS, deployed=_spec("qwen")) if f.code == "recreated_object"
    ]
    assert not [f for f in run_preflight(_spec("qwen"), FACTS) if f.code == "recreated_object"]
