"""Preflight, one check at a time, on facts built by hand (no cluster needed)."""

from __future__ import annotations

from topologies.preflight import ClusterFacts, NodeFacts, ObjectFacts, has_errors, run_preflight
from topologies.render import kthena
from topologies.tests.conftest import spec_of

ASCEND = "huawei.com/ascend-1980"
GPU = "nvidia.com/gpu"
KTHENA = frozenset(kthena.REQUIRED_CRDS)


def _nodes(resource: str, per_node: int, count: int = 2, **kw) -> tuple[NodeFacts, ...]:  # type: ignore[no-untyped-def]
    return tuple(NodeFacts(name=f"n{i}", allocatable={resource: per_node}, **kw) for i in range(count))


def _codes(findings) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.code for f in findings}


def test_clean_cluster_has_no_findings() -> None:
    findings = run_preflight(
        spec_of("deepseek-ascend-mooncake"), ClusterFacts(crds=KTHENA, nodes=_nodes(ASCEND, 8))
    )
    assert findings == []


def test_unreachable_cluster_is_one_blocking_finding() -> None:
    findings = run_preflight(
        spec_of("qwen-gpu-nixl"), ClusterFacts(reachable=False, error="connection refused")
    )
    assert [(f.level, f.code) for f in findings] == [("error", "cluster_unreachable")]
    assert "connection refused" in findings[0].message


def test_missing_kthena_crds_blocks_with_fix() -> None:
    findings = run_preflight(spec_of("qwen-gpu-nixl"), ClusterFacts(nodes=_nodes(GPU, 4)))
    crd = next(f for f in findings if f.code == "crds_missing")
    assert (
        crd.level == "error"
        and crd.field == "backend"
        and "modelservings.workload.serving.volcano.sh" in crd.message
    )
    assert "backend 'deployments'" in crd.fix
    assert (
        run_preflight(spec_of("qwen-gpu-nixl", backend="deployments"), ClusterFacts(nodes=_nodes(GPU, 4)))
        == []
    )


def test_wrong_accelerator_name_lists_what_nodes_offer() -> None:
    spec = spec_of("deepseek-ascend-mooncake")
    data = spec.to_dict()
    for role in data["roles"].values():
        role["accelerator_resource"] = "huawei.com/Ascend910"
    from topologies.spec import TopologySpec

    findings = run_preflight(
        TopologySpec.from_dict(data), ClusterFacts(crds=KTHENA, nodes=_nodes(ASCEND, 16))
    )
    wrong = [f for f in findings if f.code == "accelerator_resource_unknown"]
    assert {f.field for f in wrong} == {
        "roles.prefill.accelerator_resource",
        "roles.decode.accelerator_resource",
    }
    assert (
        wrong[0].message
        == "no node offers `huawei.com/Ascend910`; nodes offer `huawei.com/ascend-1980` (32 free)"
    )


def test_not_enough_free_accelerators_for_all_replicas() -> None:
    nodes = (NodeFacts("a", allocatable={GPU: 2}, in_use={GPU: 1}), NodeFacts("b", allocatable={GPU: 1}))
    findings = run_preflight(spec_of("qwen-gpu-nixl", backend="deployments"), ClusterFacts(nodes=nodes))
    assert _codes(findings) == set()
    busy = (NodeFacts("a", allocatable={GPU: 2}, in_use={GPU: 2}), NodeFacts("b", allocatable={GPU: 1}))
    findings = run_preflight(spec_of("qwen-gpu-nixl", backend="deployments"), ClusterFacts(nodes=busy))
    short = [f for f in findings if f.code == "accelerators_insufficient"]
    assert len(short) == 1 and short[0].level == "error"
    assert "needs 1 pods × 1 `nvidia.com/gpu`; the nodes have room for 0" in short[0].message


def test_own_pods_count_as_free_on_redeploy() -> None:
    busy = (NodeFacts("a", allocatable={GPU: 2}, in_use={GPU: 2}),)
    spec = spec_of("qwen-gpu-nixl", backend="deployments")
    assert has_errors(run_preflight(spec, ClusterFacts(nodes=busy)))
    assert not has_errors(run_preflight(spec, ClusterFacts(nodes=busy, own_in_use={"a": {GPU: 2}})))


def test_pod_larger_than_any_node() -> None:
    findings = run_preflight(
        spec_of("deepseek-ascend-mooncake"), ClusterFacts(crds=KTHENA, nodes=_nodes(ASCEND, 2))
    )
    big = [f for f in findings if f.code == "accelerators_per_pod"]
    assert (
        big and "needs 4 `huawei.com/ascend-1980` on a single node; the largest node has 2" in big[0].message
    )


def test_idle_accelerators_are_a_warning() -> None:
    data = spec_of("qwen-gpu-nixl").to_dict()
    data["roles"]["decode"]["accelerator_count"] = 2
    data["rebalancing"]["accelerator_budget"] = 6
    from topologies.spec import TopologySpec

    findings = run_preflight(TopologySpec.from_dict(data), ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4)))
    idle = [f for f in findings if f.code == "accelerators_idle"]
    assert [(f.level, f.field) for f in idle] == [("warning", "roles.decode.accelerator_count")]
    assert not has_errors(findings)


def test_unready_nodes_do_not_count() -> None:
    findings = run_preflight(
        spec_of("qwen-gpu-nixl"), ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4, ready=False))
    )
    assert _codes(findings) == {"no_nodes"}


def test_node_selector_without_matching_nodes() -> None:
    data = spec_of("qwen-gpu-nixl").to_dict()
    data["roles"]["prefill"]["node_selector"] = {"pool": "h100"}
    from topologies.spec import TopologySpec

    findings = run_preflight(TopologySpec.from_dict(data), ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4)))
    assert [f.field for f in findings if f.code == "node_selector_unmatched"] == [
        "roles.prefill.node_selector"
    ]


def test_mooncake_master_service_missing_or_wrong_port() -> None:
    spec = spec_of(
        "qwen-gpu-nixl",
        connector={"type": "mooncake-store", "master_address": "mooncake-master.kv.svc:50051"},
    )
    facts = ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4))
    missing = [f for f in run_preflight(spec, facts) if f.code == "connector_backend_missing"]
    assert (
        missing
        and missing[0].field == "connector.master_address"
        and "kv/mooncake-master" in missing[0].message
    )
    wrong_port = ClusterFacts(
        crds=KTHENA,
        nodes=_nodes(GPU, 4),
        services=(ObjectFacts("Service", "kv", "mooncake-master", ports=(50052,)),),
    )
    finding = next(f for f in run_preflight(spec, wrong_port) if f.code == "connector_backend_port")
    assert "mooncake-master.kv.svc:50052" in finding.fix
    ok = ClusterFacts(
        crds=KTHENA,
        nodes=_nodes(GPU, 4),
        services=(ObjectFacts("Service", "kv", "mooncake-master", ports=(50051,)),),
    )
    assert run_preflight(spec, ok) == []


def test_master_address_in_own_namespace_and_ip() -> None:
    spec = spec_of(
        "qwen-gpu-nixl", connector={"type": "mooncake-store", "master_address": "mooncake-master:50051"}
    )
    facts = ClusterFacts(
        crds=KTHENA,
        nodes=_nodes(GPU, 4),
        services=(ObjectFacts("Service", "default", "mooncake-master", ports=(50051,)),),
    )
    assert run_preflight(spec, facts) == []
    spec = spec_of("qwen-gpu-nixl", connector={"type": "mooncake-store", "master_address": "10.0.0.5:50051"})
    findings = run_preflight(spec, ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4)))
    assert [(f.level, f.code) for f in findings] == [("warning", "connector_backend_unverified")]


def test_namespace_created_or_refused() -> None:
    spec = spec_of("qwen-gpu-nixl")
    facts = ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4), namespace_exists=False)
    assert [(f.level, f.code) for f in run_preflight(spec, facts)] == [("warning", "namespace_created")]
    facts = ClusterFacts(
        crds=KTHENA, nodes=_nodes(GPU, 4), namespace_exists=False, can_create_namespace=False
    )
    finding = run_preflight(spec, facts)[0]
    assert finding.code == "namespace_missing" and "kubectl create namespace default" in finding.fix


def test_conflicting_objects_not_owned_by_tandem() -> None:
    spec = spec_of("qwen-gpu-nixl")
    foreign = ObjectFacts("ModelServing", "default", "qwen3-nixl", labels={"app": "someone-else"})
    findings = run_preflight(spec, ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4), objects=(foreign,)))
    assert [f.code for f in findings] == ["object_conflict"]
    assert "not managed by Tandem" in findings[0].message
    ours = ObjectFacts(
        "ModelServing",
        "default",
        "qwen3-nixl",
        labels={"app.kubernetes.io/managed-by": "tandem", "tandem.io/topology": "5"},
    )
    facts = ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4), objects=(ours,))
    assert run_preflight(spec, facts, topology_id=5) == []
    assert [f.code for f in run_preflight(spec, facts, topology_id=6)] == ["object_owned_elsewhere"]


def test_colliding_ports() -> None:
    spec = spec_of("qwen-gpu-nixl", connector={"type": "nixl", "side_channel_port": 8000})
    findings = run_preflight(spec, ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4)))
    assert [(f.code, f.field) for f in findings] == [("port_collision", "connector.side_channel_port")]
    assert "collides with port" in findings[0].message


def test_errors_sort_before_warnings() -> None:
    spec = spec_of("qwen-gpu-nixl")
    findings = run_preflight(spec, ClusterFacts(nodes=_nodes(GPU, 4), namespace_exists=False))
    assert [f.level for f in findings] == ["error", "warning"]


def test_denied_permissions_block_with_the_rule_to_add() -> None:
    denied = frozenset({("patch", "workload.serving.volcano.sh", "modelservings"), ("patch", "", "services")})
    facts = ClusterFacts(crds=KTHENA, nodes=_nodes(GPU, 4), denied=denied)
    findings = run_preflight(spec_of("qwen-gpu-nixl"), facts)
    assert [f.code for f in findings] == ["permission_denied"]
    assert "may not patch modelservings.workload.serving.volcano.sh on this cluster" in findings[0].message
    assert findings[0].fix.endswith(
        '- apiGroups: ["workload.serving.volcano.sh"]\n  resources: ["modelservings"]\n  verbs: ["patch"]'
    )
    plain = run_preflight(
        spec_of("qwen-gpu-nixl", backend="deployments"), ClusterFacts(nodes=_nodes(GPU, 4), denied=denied)
    )
    assert [f.message.split(" on this")[0] for f in plain] == ["Tandem may not patch services"]
    assert plain[0].fix.endswith('- apiGroups: [""]\n  resources: ["services"]\n  verbs: ["patch"]')


def test_missing_permission_reads_are_skipped_and_only_permission_findings_shown() -> None:
    denied = frozenset({("list", "", "nodes")})
    findings = run_preflight(spec_of("qwen-gpu-nixl"), ClusterFacts(crds=KTHENA, denied=denied, partial=True))
    assert [f.code for f in findings] == ["permission_denied"]
    assert "list nodes" in findings[0].message and "count accelerators" in findings[0].message
