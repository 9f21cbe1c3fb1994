"""The Kubernetes permissions Tandem needs: one table, read by the cluster check, preflight,
`docker/k8s/rbac.yaml`'s test and the least-privilege end-to-end tests (pure, no Django).

Each row names a resource, the verbs Tandem's jobs use on it, why, and which jobs use them. The
rows for the kinds the renderers emit are held to the renderers by a test that renders every
backend × connector × engine and checks every emitted kind is here with the verbs applying,
reading back and removing need; a Role a renderer emits may grant only what Tandem itself holds
(RBAC refuses to let a credential grant more), so those rules are rows here too.

Verbs as the API server sees them: server-side apply is `patch` (also when it creates the object),
`kube.get_object` is `get`, `kube.delete_object` is `delete`, `kube.list_*` is `list`, reading a
pod's log is `get pods/log`, the API-server proxy is `get pods/proxy` / `get services/proxy`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

KTHENA_GROUPS = ("workload.serving.volcano.sh", "networking.serving.volcano.sh")

# Jobs, as named in the table and on the cluster page.
REGISTER = "registration probe"
CHECK = "cluster check"
PREFLIGHT = "preflight"
DEPLOY = "deploy, scale, roll back"
REMOVE = "remove"
DRIFT = "drift check"
DIAGNOSE = "deploy diagnosis"
TELEMETRY = "telemetry"
LINKS = "KV-link health"
GRANT = "granted onward"  # held only so a rendered Role may grant it (never called by Tandem itself)

# What a job does with each object a renderer emits: apply it (server-side apply: `patch`), read it
# back (readiness, drift, conflicts in preflight: `get`), prune it or remove it (`delete`).
RENDERED_VERBS = ("delete", "get", "patch")
DEPLOY_JOBS = (PREFLIGHT, DEPLOY, REMOVE, DRIFT, DIAGNOSE)
PROXY_SOURCE = "the API-server proxy metrics source"
REBALANCE = "in-place role switch"
IN_PLACE = "in-place role switches (MindIE with LLM-DataDist, SGLang with Mooncake, on Kthena)"
PLANNER = "planner"
AUTO_MODE = "the planner's auto mode"
HANDOVER = "handing the ratio bounds to Kthena's autoscaler"


@dataclass(frozen=True)
class Permission:
    group: str  # "" is the core group
    resource: str  # "pods/log" for a subresource
    verbs: tuple[str, ...]
    why: str
    jobs: tuple[str, ...]
    only_for: str = ""  # empty: always needed; otherwise what needs it (a metrics source, ...)
    rendered_kind: str = ""  # the kind a renderer emits, for the rows that exist because of one

    @property
    def kthena(self) -> bool:
        return self.group in KTHENA_GROUPS


def _rendered(group: str, resource: str, kind: str, why: str) -> Permission:
    return Permission(
        group, resource, RENDERED_VERBS, why, (PREFLIGHT, DEPLOY, REMOVE, DRIFT), rendered_kind=kind
    )


PERMISSIONS: tuple[Permission, ...] = (
    # Objects the renderers emit (topologies/render): Kthena backend ...
    _rendered(
        "workload.serving.volcano.sh", "modelservings", "ModelServing", "run the prefill and decode pools"
    ),
    _rendered(
        "networking.serving.volcano.sh", "modelservers", "ModelServer", "route to the prefill/decode pools"
    ),
    _rendered("networking.serving.volcano.sh", "modelroutes", "ModelRoute", "expose the served model name"),
    # ... plain Deployments backend ...
    _rendered("apps", "deployments", "Deployment", "run the pools and the P/D router without Kthena"),
    _rendered("", "services", "Service", "give each role and the router a stable address"),
    _rendered("", "serviceaccounts", "ServiceAccount", "the P/D router's identity"),
    _rendered("rbac.authorization.k8s.io", "roles", "Role", "let the P/D router read its pods and endpoints"),
    _rendered("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", "bind the router's Role to it"),
    # ... and both, for Mooncake Store and MindIE configuration files.
    _rendered("", "configmaps", "ConfigMap", "Mooncake Store and MindIE configuration files"),
    # Namespaces: a deploy creates the target namespace by server-side apply (`patch`).
    Permission(
        "", "namespaces", ("get", "patch"), "check and create the target namespace", (PREFLIGHT, DEPLOY)
    ),
    Permission(
        "",
        "pods",
        ("list",),
        "follow rollouts, count accelerators in use, find the pods to scrape",
        (CHECK, PREFLIGHT, DEPLOY, REMOVE, TELEMETRY),
    ),
    # The router Role (plain backend) grants get/list/watch on pods and endpoints; RBAC lets Tandem
    # grant only permissions it holds itself, so it holds these.
    Permission(
        "",
        "pods",
        ("get", "watch"),
        "held so Tandem may grant them to the P/D router's Role",
        (DEPLOY, GRANT),
    ),
    Permission(
        "",
        "endpoints",
        ("get", "list", "watch"),
        "held so Tandem may grant them to the P/D router's Role; find the Kthena router's metrics replicas",
        (DEPLOY, GRANT, TELEMETRY),
    ),
    Permission(
        "", "pods/log", ("get",), "show why a pod failed; read engine logs for link state", (DIAGNOSE, LINKS)
    ),
    Permission("", "events", ("list",), "explain scheduling and image failures", (DIAGNOSE,)),
    Permission("", "nodes", ("list",), "count accelerators", (CHECK, PREFLIGHT, DEPLOY)),
    Permission("apiextensions.k8s.io", "customresourcedefinitions", ("list",), "detect Kthena", (CHECK,)),
    Permission(
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        ("create",),
        "ask the cluster what Tandem may do",
        (REGISTER, CHECK, PREFLIGHT),
    ),
    Permission(
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        ("create",),
        "list the rules Tandem holds (one request instead of one review per permission)",
        (CHECK, PREFLIGHT),
    ),
    # Only when the cluster's metrics are read through the API server.
    Permission(
        "",
        "pods/proxy",
        ("get", "create"),
        "scrape engine metrics and send the KV-link probes (POST) through the API server",
        (TELEMETRY, LINKS),
        PROXY_SOURCE,
    ),
    Permission(
        "",
        "services/proxy",
        ("get",),
        "scrape router metrics through the API server",
        (TELEMETRY,),
        PROXY_SOURCE,
    ),
    # Only for engines switched in place (rebalancing/switching.py says which).
    Permission(
        "",
        "pods",
        ("patch",),
        "relabel an instance's serving role: stop routing to it, then route it as its new role",
        (REBALANCE,),
        IN_PLACE,
    ),
    Permission(
        "",
        "pods/proxy",
        ("get", "create"),
        "drain, unlink, switch and re-link an instance through its engine's switch interface",
        (REBALANCE,),
        IN_PLACE,
    ),
    # Only for the planner's auto mode (kube/owners.py): before it starts and on every tick, whether another
    # autoscaler of the namespace sets the roles' replicas; without them auto mode is refused.
    Permission(
        "autoscaling",
        "horizontalpodautoscalers",
        ("list",),
        "see whether an HPA sets the roles' replicas",
        (PLANNER,),
        AUTO_MODE,
    ),
    Permission(
        "keda.sh",
        "scaledobjects",
        ("list",),
        "see whether KEDA sets the roles' replicas",
        (PLANNER,),
        AUTO_MODE,
    ),
    Permission(
        "workload.serving.volcano.sh",
        "autoscalingpolicies",
        ("list",),
        "see whether Kthena's autoscaler sets the roles' replicas",
        (PLANNER,),
        AUTO_MODE,
    ),
    # Only for the hand-over: read and rewrite the AutoscalingPolicy's ratioConstraint.
    Permission(
        "workload.serving.volcano.sh",
        "autoscalingpolicies",
        ("get", "update"),
        "write the planner's ratio bounds into Kthena's AutoscalingPolicy",
        (PLANNER,),
        HANDOVER,
    ),
)


@dataclass(frozen=True)
class Need:
    """One verb on one resource, as a SelfSubjectAccessReview asks it."""

    verb: str
    group: str
    resource: str
    why: str
    only_for: str = ""

    @property
    def kthena(self) -> bool:
        return self.group in KTHENA_GROUPS

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.verb, self.group, self.resource)

    def label(self) -> str:
        group = f".{self.group}" if self.group else ""
        return f"{self.verb} {self.resource}{group}"


def needs(permissions: Iterable[Permission] = PERMISSIONS) -> tuple[Need, ...]:
    return tuple(Need(v, p.group, p.resource, p.why, p.only_for) for p in permissions for v in p.verbs)


REQUIRED_ACCESS: tuple[Need, ...] = needs()


def granted(permissions: Iterable[Permission] = PERMISSIONS) -> set[tuple[str, str, str]]:
    """(group, resource, verb) triples the table needs."""
    return {(p.group, p.resource, v) for p in permissions for v in p.verbs}


def rendered_permissions() -> dict[tuple[str, str], Permission]:
    """apiVersion group + kind → the row for objects of that kind."""
    return {(p.group, p.rendered_kind): p for p in PERMISSIONS if p.rendered_kind}


def needs_for_kinds(kinds: Iterable[tuple[str, str]], *, kthena: bool) -> tuple[Need, ...]:
    """What deploying (and scaling, rolling back, removing) objects of these (group, kind)s needs: their
    rows plus the rows of the jobs a deploy runs (optional rows and Kthena's without Kthena left out)."""
    wanted = set(kinds)
    rows = [
        p
        for p in PERMISSIONS
        if not p.only_for
        and set(p.jobs) & set(DEPLOY_JOBS)
        and (p.rendered_kind == "" or (p.group, p.rendered_kind) in wanted)
        and (kthena or not p.kthena)
    ]
    return needs(rows)


def rule_snippet(missing: Iterable[Need]) -> str:
    """The RBAC rules (YAML, for a ClusterRole's `rules:`) that grant exactly the missing needs."""
    by_resource: dict[tuple[str, str], list[str]] = {}
    for need in missing:
        verbs = by_resource.setdefault((need.group, need.resource), [])
        if need.verb not in verbs:
            verbs.append(need.verb)
    lines = []
    for (group, resource), verbs in sorted(by_resource.items()):
        lines.append(f'- apiGroups: ["{group}"]')
        lines.append(f'  resources: ["{resource}"]')
        lines.append("  verbs: [" + ", ".join(f'"{v}"' for v in sorted(verbs)) + "]")
    return "\n".join(lines)


def rules_grants(rules: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) triples a list of RBAC rules grants (no wildcards expected)."""
    out: set[tuple[str, str, str]] = set()
    for rule in rules:
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    out.add((str(group), str(resource), str(verb)))
    return out


def rules_allow(rules: Iterable[dict[str, Any]], need: Need) -> bool:
    """Whether RBAC rules (as a SelfSubjectRulesReview lists them) allow the need on any object of
    its resource: a rule limited to resourceNames does not, since Tandem names objects per topology."""
    sub = need.resource.partition("/")[2]
    for rule in rules:
        verbs = rule.get("verbs") or []
        groups = rule.get("apiGroups") or []
        resources = rule.get("resources") or []
        if rule.get("resourceNames"):
            continue
        if "*" not in verbs and need.verb not in verbs:
            continue
        if "*" not in groups and need.group not in groups:
            continue
        if "*" in resources or need.resource in resources or (sub and f"*/{sub}" in resources):
            return True
    return False
