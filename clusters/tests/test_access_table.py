"""The permission table cannot drift: from what the renderers emit, and from what rbac.yaml grants."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clusters.access import (
    AUTO_MODE,
    HANDOVER,
    IN_PLACE,
    PERMISSIONS,
    PROXY_SOURCE,
    RENDERED_VERBS,
    REQUIRED_ACCESS,
    granted,
    needs_for_kinds,
    rendered_permissions,
    rule_snippet,
    rules_grants,
)
from topologies.render import render
from topologies.spec import TopologySpec
from topologies.tests.combinations import all_combinations, combination

RBAC_YAML = Path(__file__).resolve().parents[2] / "docker" / "k8s" / "rbac.yaml"
COMBINATIONS = all_combinations()


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def _rendered(engine: str, connector: str, backend: str) -> list[dict]:  # type: ignore[type-arg]
    return render(TopologySpec.from_dict(combination(engine, connector, backend)), topology_id=7, revision=3)


@pytest.mark.parametrize(
    ("engine", "connector", "backend"), COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS]
)
def test_every_kind_a_combination_renders_is_in_the_table(engine: str, connector: str, backend: str) -> None:
    rows = rendered_permissions()
    for obj in _rendered(engine, connector, backend):
        row = rows.get((_group(obj["apiVersion"]), obj["kind"]))
        assert row is not None, (
            f"{obj['kind']} ({obj['apiVersion']}) is rendered but not in clusters/access.py"
        )
        assert set(RENDERED_VERBS) <= set(row.verbs), f"{obj['kind']}: apply, read back and removal need them"


def test_every_rendered_row_is_rendered_by_some_combination() -> None:
    emitted = {(_group(o["apiVersion"]), o["kind"]) for c in COMBINATIONS for o in _rendered(*c)}
    assert set(rendered_permissions()) == emitted


def test_config_maps_come_from_mooncake_store_and_mindie() -> None:
    kinds = {o["kind"] for o in _rendered("vllm", "mooncake-store", "kthena")}
    kinds |= {o["kind"] for o in _rendered("mindie", "llm-datadist", "deployments")}
    assert "ConfigMap" in kinds
    assert ("patch", "", "configmaps") in {n.key for n in REQUIRED_ACCESS}


@pytest.mark.parametrize(
    ("engine", "connector", "backend"), COMBINATIONS, ids=["-".join(c) for c in COMBINATIONS]
)
def test_roles_a_renderer_emits_grant_only_what_tandem_holds(
    engine: str, connector: str, backend: str
) -> None:
    held = granted(p for p in PERMISSIONS if not p.only_for)
    for obj in _rendered(engine, connector, backend):
        if obj["kind"] in ("Role", "ClusterRole"):
            wanted = rules_grants(obj["rules"])
            assert wanted <= held, f"{obj['metadata']['name']} grants {sorted(wanted - held)} Tandem lacks"


def test_namespace_creation_by_server_side_apply_needs_patch() -> None:
    keys = {n.key for n in needs_for_kinds(set(), kthena=False)}
    assert {("get", "", "namespaces"), ("patch", "", "namespaces")} <= keys


def test_optional_rows_are_marked_with_what_needs_them() -> None:
    proxy = {(n.verb, n.resource) for n in REQUIRED_ACCESS if n.only_for == PROXY_SOURCE}
    assert proxy == {("get", "pods/proxy"), ("create", "pods/proxy"), ("get", "services/proxy")}
    in_place = {(n.verb, n.resource) for n in REQUIRED_ACCESS if n.only_for == IN_PLACE}
    assert in_place == {("patch", "pods"), ("get", "pods/proxy"), ("create", "pods/proxy")}
    planner = {(n.verb, n.resource) for n in REQUIRED_ACCESS if n.only_for == AUTO_MODE}
    assert planner == {
        ("list", "horizontalpodautoscalers"),
        ("list", "scaledobjects"),
        ("list", "autoscalingpolicies"),
    }
    handover = {(n.verb, n.resource) for n in REQUIRED_ACCESS if n.only_for == HANDOVER}
    assert handover == {("get", "autoscalingpolicies"), ("update", "autoscalingpolicies")}
    optional = {PROXY_SOURCE, IN_PLACE, AUTO_MODE, HANDOVER}
    assert {n.only_for for n in REQUIRED_ACCESS if n.only_for} == optional
    assert ("get", "", "pods/log") in {n.key for n in REQUIRED_ACCESS if not n.only_for}


def test_kthena_rows_are_left_out_of_a_plain_deploy() -> None:
    kinds = {(_group(o["apiVersion"]), o["kind"]) for o in _rendered("vllm", "nixl", "deployments")}
    plain = needs_for_kinds(kinds, kthena=False)
    assert not any(n.kthena for n in plain)
    assert ("patch", "rbac.authorization.k8s.io", "roles") in {n.key for n in plain}
    assert not any(n.only_for for n in plain)


def _cluster_role() -> dict:  # type: ignore[type-arg]
    docs = [d for d in yaml.safe_load_all(RBAC_YAML.read_text()) if d]
    [role] = [d for d in docs if d["kind"] == "ClusterRole"]
    return role


def test_shipped_rbac_yaml_grants_exactly_the_table() -> None:
    grants = rules_grants(_cluster_role()["rules"])
    assert not any("*" in triple for g in grants for triple in g), "rbac.yaml uses a wildcard"
    table = granted()
    assert sorted(table - grants) == [], "rbac.yaml lacks what Tandem needs"
    assert sorted(grants - table) == [], "rbac.yaml grants more than Tandem uses"


def test_shipped_rbac_yaml_binds_the_role_to_tandems_service_account() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all(RBAC_YAML.read_text()) if d}
    binding = docs["ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "tandem",
    }
    sa = docs["ServiceAccount"]["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    ]


def test_rule_snippet_is_valid_rbac_yaml_granting_exactly_the_missing_needs() -> None:
    missing = [n for n in REQUIRED_ACCESS if n.resource in ("configmaps", "namespaces") and n.verb == "patch"]
    text = rule_snippet(missing)
    assert text == (
        '- apiGroups: [""]\n  resources: ["configmaps"]\n  verbs: ["patch"]\n'
        '- apiGroups: [""]\n  resources: ["namespaces"]\n  verbs: ["patch"]'
    )
    assert rules_grants(yaml.safe_load(text)) == {("", "configmaps", "patch"), ("", "namespaces", "patch")}


def test_rules_allow_matches_a_rules_review_as_rbac_does() -> None:
    from clusters.access import Need, rules_allow

    patch_cm = Need("patch", "", "configmaps", "")
    log = Need("get", "", "pods/log", "")
    assert rules_allow([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}], patch_cm)
    assert rules_allow([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], patch_cm)
    assert not rules_allow(
        [{"apiGroups": ["apps"], "resources": ["configmaps"], "verbs": ["patch"]}], patch_cm
    )
    assert not rules_allow([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}], patch_cm)
    named = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"], "resourceNames": ["x"]}
    assert not rules_allow([named], patch_cm), "a rule for named objects does not cover Tandem's objects"
    assert rules_allow([{"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]}], log)
    assert not rules_allow([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], log)


def test_every_autoscaler_kind_the_planner_lists_has_a_list_row() -> None:
    from kube.owners import AUTOSCALERS

    held = {(g, r) for g, r, v in granted() if v == "list"}
    for api_version, kind in AUTOSCALERS:
        plural = kind.lower()[:-1] + "ies" if kind.endswith("y") else kind.lower() + "s"
        assert (_group(api_version), plural) in held, f"listing {kind} ({api_version}) is not in the table"
