"""The RBAC objects a fresh cluster has: the user-facing ClusterRoles (`cluster-admin`, `admin`,
`edit`, `view`, aggregated from the `system:aggregate-to-*` roles by label as upstream does it),
the discovery and self-review roles every authenticated user gets, and their bindings.

The rules follow the Kubernetes bootstrap policy closely for the resources this sandbox serves
and the ones clients commonly ask about; `aggregate()` is the cluster-role aggregation controller.
"""

from __future__ import annotations

from typing import Any

from sandbox.apiserver.selectors import Requirement

MANAGER = "clusterrole-aggregation-controller"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
ALL_RW = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _role(
    name: str,
    rules: list[dict[str, Any]] | None,
    *,
    labels: dict[str, str] | None = None,
    aggregate_from: str | None = None,
) -> dict[str, Any]:
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {**BOOTSTRAP_LABELS, **(labels or {})},
            "annotations": dict(AUTOUPDATE),
        },
    }
    if aggregate_from is not None:
        role["aggregationRule"] = {
            "clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO + aggregate_from: "true"}}]
        }
        role["rules"] = []
    else:
        role["rules"] = rules or []
    return role


VIEW_RULES = [
    _rule(
        [""],
        [
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
        ],
        READ,
    ),
    _rule(
        [""],
        [
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
        ],
        READ,
    ),
    _rule([""], ["namespaces"], READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], READ),
    _rule(
        ["apps"],
        [
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
        READ,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], READ),
]

EDIT_RULES = [
    _rule(
        [""],
        ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"],
        READ,
    ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule(
        [""],
        [
            "configmaps",
            "events",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "secrets",
            "serviceaccounts",
            "services",
            "services/proxy",
        ],
        WRITE,
    ),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(
        ["apps"],
        [
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
        WRITE,
    ),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], WRITE),
    _rule(["coordination.k8s.io"], ["leases"], ALL_RW),
]

ADMIN_RULES = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule(["rbac.authorization.k8s.io"], ["rolebindings", "roles"], ALL_RW),
]

DISCOVERY_URLS = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
]


def cluster_roles() -> list[dict[str, Any]]:
    return [
        _role("cluster-admin", [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        _role("admin", None, aggregate_from="admin"),
        _role("edit", None, labels={AGGREGATE_TO + "admin": "true"}, aggregate_from="edit"),
        _role("view", None, labels={AGGREGATE_TO + "edit": "true"}, aggregate_from="view"),
        _role("system:aggregate-to-admin", ADMIN_RULES, labels={AGGREGATE_TO + "admin": "true"}),
        _role("system:aggregate-to-edit", EDIT_RULES, labels={AGGREGATE_TO + "edit": "true"}),
        _role("system:aggregate-to-view", VIEW_RULES, labels={AGGREGATE_TO + "view": "true"}),
        _role("system:discovery", [{"nonResourceURLs": DISCOVERY_URLS, "verbs": ["get"]}]),
        _role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                }
            ],
        ),
        _role(
            "system:basic-user",
            [
                _rule(
                    ["authorization.k8s.io"],
                    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ["create"],
                ),
                _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
            ],
        ),
    ]


def _binding(name: str, role: str, groups: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": dict(AUTOUPDATE)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups],
    }


def cluster_role_bindings() -> list[dict[str, Any]]:
    return [
        _binding("cluster-admin", "cluster-admin", ["system:masters"]),
        _binding("system:discovery", "system:discovery", ["system:authenticated"]),
        _binding("system:basic-user", "system:basic-user", ["system:authenticated"]),
        _binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            ["system:authenticated", "system:unauthenticated"],
        ),
    ]


# -- aggregation ------------------------------------------------------------------------------
def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions); an empty selector matches everything."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(str(expr.get("operator")))
        if op is None:
            return False
        if not Requirement(str(expr.get("key")), op, tuple(expr.get("values") or ())).matches(labels):
            return False
    return True


def aggregated_rules(role: dict[str, Any], all_roles: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The rules an aggregated ClusterRole should hold (None when it has no aggregationRule)."""
    rule = role.get("aggregationRule")
    if not isinstance(rule, dict):
        return None
    selectors = rule.get("clusterRoleSelectors") or []
    rules: list[dict[str, Any]] = []
    name = role["metadata"]["name"]
    for other in sorted(all_roles, key=lambda r: r["metadata"]["name"]):
        if other["metadata"]["name"] == name:
            continue
        labels = other["metadata"].get("labels") or {}
        if any(selector_matches(s, labels) for s in selectors if isinstance(s, dict)):
            for item in other.get("rules") or []:
                if item not in rules:
                    rules.append(item)
    return rules
