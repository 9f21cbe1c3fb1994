from __future__ import annotations

from clusters.checks import KTHENA_CRDS, REQUIRED_ACCESS, CheckFacts, assess


def _perms(denied: set[str] = frozenset()):
    return [
        {
            "verb": n.verb,
            "group": n.group,
            "resource": n.resource,
            "label": n.label(),
            "kthena": n.kthena,
            "allowed": n.label() not in denied,
        }
        for n in REQUIRED_ACCESS
    ]


def test_unreachable_carries_the_error_in_words():
    state, message = assess(
        CheckFacts(reachable=False, error="cannot reach https://x:6443: connection refused")
    )
    assert state == "unreachable"
    assert message == "cannot reach https://x:6443: connection refused"


def test_healthy_needs_permissions_and_a_ready_node():
    facts = CheckFacts(
        reachable=True, crds=set(KTHENA_CRDS), permissions=_perms(), nodes_total=4, nodes_ready=4
    )
    assert assess(facts) == ("healthy", "")
    assert facts.kthena_installed is True


def test_missing_permission_degrades_and_names_it():
    facts = CheckFacts(
        reachable=True,
        crds=set(KTHENA_CRDS),
        permissions=_perms({"delete services"}),
        nodes_total=1,
        nodes_ready=1,
    )
    state, message = assess(facts)
    assert state == "degraded"
    assert "may not delete services" in message


def test_kthena_permissions_do_not_matter_without_kthena():
    denied = {n.label() for n in REQUIRED_ACCESS if n.kthena}
    facts = CheckFacts(reachable=True, crds=set(), permissions=_perms(denied), nodes_total=1, nodes_ready=1)
    assert facts.kthena_installed is False
    assert assess(facts) == ("healthy", "")


def test_no_ready_nodes_degrades():
    facts = CheckFacts(reachable=True, crds=set(), permissions=_perms(), nodes_total=3, nodes_ready=0)
    assert assess(facts) == ("degraded", "none of the 3 nodes is Ready")


def test_denied_permissions_name_the_rules_to_add():
    facts = CheckFacts(
        reachable=True,
        crds=set(KTHENA_CRDS),
        permissions=_perms({"patch configmaps", "patch namespaces"}),
        nodes_total=1,
        nodes_ready=1,
    )
    state, error = assess(facts)
    assert state == "degraded"
    assert error.endswith(
        '- apiGroups: [""]\n  resources: ["configmaps"]\n  verbs: ["patch"]\n'
        '- apiGroups: [""]\n  resources: ["namespaces"]\n  verbs: ["patch"]'
    )


def test_permissions_only_a_metrics_source_in_place_switches_or_the_planner_need_do_not_degrade_the_cluster():
    optional = {n.label() for n in REQUIRED_ACCESS if n.only_for}
    assert optional == {
        "get pods/proxy",
        "create pods/proxy",
        "get services/proxy",
        "patch pods",
        "list horizontalpodautoscalers.autoscaling",
        "list scaledobjects.keda.sh",
        "list autoscalingpolicies.workload.serving.volcano.sh",
        "get autoscalingpolicies.workload.serving.volcano.sh",
        "update autoscalingpolicies.workload.serving.volcano.sh",
    }
    perms = [{**p, "only_for": n.only_for} for p, n in zip(_perms(optional), REQUIRED_ACCESS, strict=True)]
    facts = CheckFacts(reachable=True, crds=set(KTHENA_CRDS), permissions=perms, nodes_total=1, nodes_ready=1)
    assert assess(facts) == ("healthy", "")
