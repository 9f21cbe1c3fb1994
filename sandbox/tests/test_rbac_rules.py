"""RBAC without a server: request attributes, rule matching, 403 wording, aggregation, escalation, tokens."""

from __future__ import annotations

import pytest

from sandbox.apiserver import rbac_policy
from sandbox.apiserver.authn import AUDIENCE, TokenIssuer, service_account_user
from sandbox.apiserver.rbac import Attributes, forbidden, request_attributes, rule_allows
from sandbox.apiserver.rbac_escalation import uncovered

BOT = service_account_user("dev", "bot", "uid-1")


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/dev/pods", {}, ("list", "", "pods", "", "", "dev")),
        ("GET", "/api/v1/namespaces/dev/pods", {"watch": "true"}, ("watch", "", "pods", "", "", "dev")),
        ("GET", "/api/v1/watch/namespaces/dev/pods", {}, ("watch", "", "pods", "", "", "dev")),
        ("GET", "/api/v1/pods", {}, ("list", "", "pods", "", "", "")),
        ("GET", "/api/v1/namespaces/dev/pods/p-0/log", {}, ("get", "", "pods", "log", "p-0", "dev")),
        (
            "GET",
            "/api/v1/namespaces/dev/pods/p-0:8000/proxy/metrics",
            {},
            ("get", "", "pods", "proxy", "p-0:8000", "dev"),
        ),
        (
            "GET",
            "/api/v1/namespaces/dev/services/r:http/proxy/",
            {},
            ("get", "", "services", "proxy", "r:http", "dev"),
        ),
        (
            "PATCH",
            "/apis/workload.serving.volcano.sh/v1alpha1/namespaces/dev/modelservings/m/scale",
            {},
            ("patch", "workload.serving.volcano.sh", "modelservings", "scale", "m", "dev"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/dev/configmaps",
            {},
            ("deletecollection", "", "configmaps", "", "", "dev"),
        ),
        (
            "POST",
            "/api/v1/namespaces/dev/serviceaccounts/bot/token",
            {},
            ("create", "", "serviceaccounts", "token", "bot", "dev"),
        ),
        # A namespace is its own namespace, as RequestInfo has it (a RoleBinding there can grant reading it).
        ("GET", "/api/v1/namespaces/dev", {}, ("get", "", "namespaces", "", "dev", "dev")),
        ("PATCH", "/api/v1/namespaces/new", {}, ("patch", "", "namespaces", "", "new", "new")),
        (
            "PUT",
            "/api/v1/namespaces/dev/finalize",
            {},
            ("update", "", "namespaces", "finalize", "dev", "dev"),
        ),
        ("GET", "/api/v1/nodes", {"fieldSelector": "metadata.name=n1"}, ("list", "", "nodes", "", "n1", "")),
    ],
)
def test_request_attributes_follow_request_info(method, path, query, expected) -> None:
    attrs = request_attributes(method, path, query)
    assert attrs.resource_request
    assert (
        attrs.verb,
        attrs.api_group,
        attrs.resource,
        attrs.subresource,
        attrs.name,
        attrs.namespace,
    ) == expected


@pytest.mark.parametrize(
    "path", ["/version", "/api", "/apis", "/apis/apps", "/api/v1", "/openapi/v3", "/healthz"]
)
def test_discovery_and_info_paths_are_non_resource_requests(path: str) -> None:
    attrs = request_attributes("GET", path, {})
    assert not attrs.resource_request and attrs.verb == "get" and attrs.path == path


def _attrs(
    verb: str, resource: str, sub: str = "", name: str = "", group: str = "", ns: str = "dev"
) -> Attributes:
    return Attributes(
        verb, True, api_group=group, resource=resource, subresource=sub, name=name, namespace=ns
    )


def test_rules_match_verbs_groups_resources_and_subresources_exactly() -> None:
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
    assert rule_allows(rule, _attrs("get", "pods", name="p"))
    assert not rule_allows(rule, _attrs("watch", "pods"))
    assert not rule_allows(rule, _attrs("get", "pods", sub="log", name="p")), "pods does not grant pods/log"
    assert not rule_allows(rule, _attrs("get", "pods", group="apps"))
    assert rule_allows(
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, _attrs("delete", "x", group="y")
    )
    logs = {"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]}
    assert rule_allows(logs, _attrs("get", "pods", sub="log", name="p"))
    assert not rule_allows(logs, _attrs("get", "pods", name="p"))


def test_resource_names_restrict_to_named_requests() -> None:
    rule = {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["get", "list", "create"],
        "resourceNames": ["a"],
    }
    assert rule_allows(rule, _attrs("get", "configmaps", name="a"))
    assert not rule_allows(rule, _attrs("get", "configmaps", name="b"))
    assert not rule_allows(rule, _attrs("list", "configmaps")), (
        "an unnamed list is not covered by resourceNames"
    )
    assert not rule_allows(rule, _attrs("create", "configmaps")), "a create carries no name"


def test_non_resource_urls_match_exactly_or_by_trailing_star() -> None:
    rule = {"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]}
    assert rule_allows(rule, Attributes("get", False, path="/apis/apps/v1"))
    assert rule_allows(rule, Attributes("get", False, path="/version"))
    assert not rule_allows(rule, Attributes("get", False, path="/version/x"))
    assert not rule_allows(rule, Attributes("post", False, path="/version"))
    assert not rule_allows(rule, _attrs("get", "pods")), "a non-resource rule grants no resource"


def test_forbidden_wording_matches_the_api_server() -> None:
    namespaced = forbidden(BOT, _attrs("create", "configmaps")).status()
    assert namespaced["message"] == (
        'configmaps is forbidden: User "system:serviceaccount:dev:bot" cannot create resource "configmaps" '
        'in API group "" in the namespace "dev"'
    )
    assert namespaced["reason"] == "Forbidden" and namespaced["code"] == 403
    assert namespaced["details"] == {"kind": "configmaps"}
    named = forbidden(BOT, _attrs("get", "deployments", name="web", group="apps")).status()
    assert named["message"].startswith(
        'deployments.apps "web" is forbidden: User "system:serviceaccount:dev:bot"'
    )
    assert named["details"] == {"name": "web", "group": "apps", "kind": "deployments"}
    cluster = forbidden(BOT, _attrs("list", "nodes", ns="")).status()
    assert cluster["message"].endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    sub = forbidden(BOT, _attrs("get", "pods", sub="log", name="p-0")).status()
    assert sub["message"] == (
        'pods "p-0" is forbidden: User "system:serviceaccount:dev:bot" cannot get resource "pods/log" '
        'in API group "" in the namespace "dev"'
    )
    path = forbidden(BOT, Attributes("get", False, path="/metrics")).status()
    assert path["message"] == 'forbidden: User "system:serviceaccount:dev:bot" cannot get path "/metrics"'
    assert path["details"] == {}


def test_user_facing_roles_aggregate_view_into_edit_into_admin() -> None:
    roles = rbac_policy.cluster_roles()
    by_name = {r["metadata"]["name"]: r for r in roles}
    for _ in range(3):  # as the controller does, until nothing changes
        for role in roles:
            wanted = rbac_policy.aggregated_rules(role, roles)
            if wanted is not None:
                role["rules"] = wanted
    view, edit, admin = (by_name[n]["rules"] for n in ("view", "edit", "admin"))
    assert all(rule in edit for rule in view) and all(rule in admin for rule in edit)
    pods_log = _attrs("get", "pods", sub="log", name="p")
    assert any(rule_allows(r, pods_log) for r in view)
    assert not any(rule_allows(r, _attrs("create", "configmaps")) for r in view)
    assert any(rule_allows(r, _attrs("create", "configmaps")) for r in edit)
    assert not any(rule_allows(r, _attrs("create", "roles", group="rbac.authorization.k8s.io")) for r in edit)
    assert any(rule_allows(r, _attrs("create", "roles", group="rbac.authorization.k8s.io")) for r in admin)
    assert not any(rule_allows(r, _attrs("get", "secrets", name="s")) for r in view), (
        "view never reads secrets"
    )


def test_escalation_check_finds_each_permission_not_held() -> None:
    held = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    wanted = [{"apiGroups": [""], "resources": ["pods", "endpoints"], "verbs": ["get", "list"]}]
    assert uncovered(held, wanted) == [
        {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["list"]},
    ]
    assert uncovered(held, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]) != []
    assert uncovered([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], wanted) == []


def test_tokens_are_signed_expire_and_carry_the_api_servers_audience() -> None:
    issuer = TokenIssuer()
    token, expires = issuer.issue(
        namespace="dev", name="bot", uid="u1", audiences=[AUDIENCE], expiration_seconds=600, now=1_000_000
    )
    claims = issuer.verify(token, now=1_000_100)
    assert claims is not None and claims["sub"] == "system:serviceaccount:dev:bot" and expires == 1_000_600
    assert issuer.verify(token, now=1_000_600) is None, "expired"
    head, body, sig = token.split(".")
    assert issuer.verify(f"{head}.{body}x.{sig}", now=1_000_100) is None, "tampered"
    assert TokenIssuer().verify(token, now=1_000_100) is None, "another cluster's key"
    other, _ = issuer.issue(
        namespace="dev", name="bot", uid="u1", audiences=["vault"], expiration_seconds=600, now=1_000_000
    )
    assert issuer.verify(other, now=1_000_100) is None, "a token for another audience"
