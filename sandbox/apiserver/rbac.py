"""RBAC: request attributes parsed like the API server's RequestInfo, rules matched like its RBAC
authorizer, and the 403 `Status`, SelfSubjectAccessReview and SelfSubjectRulesReview built from them.

Authorization happens before routing, on the attributes of the path alone, so every subresource
(`pods/log`, `pods/proxy`, `services/proxy`, `modelservings/scale`, ...) is checked the same way
whether or not the server serves it. Members of `system:masters` (the admin kubeconfig) are always
allowed, as on a real server.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.apiserver import rbac_policy
from sandbox.apiserver.authn import User
from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.storage import Store, WatchEvent

GROUP = "rbac.authorization.k8s.io"
_SPECIAL_VERBS = ("proxy", "watch")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
# The user of the request being served (unset for the in-process controllers, which act as the system).
current_user: contextvars.ContextVar[User | None] = contextvars.ContextVar("current_user", default=None)
_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@dataclass(frozen=True)
class Attributes:
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """What a request asks to do, derived from its method, path and query as kube-apiserver does."""
    non_resource = Attributes(verb=method.lower(), resource_request=False, path=path)
    parts = [p for p in path.strip("/").split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 2:
            return non_resource
        group, parts = parts[0], parts[1:]
    if not parts:
        return non_resource
    version, parts = parts[0], parts[1:]
    if not parts:
        return non_resource
    if parts[0] in _SPECIAL_VERBS and len(parts) >= 2:
        verb, parts = parts[0], parts[1:]
    else:
        verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 else ""
    if len(parts) < 2 and verb == "get":
        verb = "watch" if _truthy(query.get("watch")) else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    if not name and verb in ("list", "watch", "deletecollection"):
        for selector in (query.get("fieldSelector") or "").split(","):
            key, _, value = selector.partition("=")
            if key.strip() == "metadata.name" and value.strip("= "):
                name = value.strip("= ")
    return Attributes(verb, True, path, group, version, resource, subresource, name, namespace)


# -- rule matching (pure) ---------------------------------------------------------------------
def _resource_matches(rule: dict[str, Any], attrs: Attributes) -> bool:
    for item in rule.get("resources") or []:
        if item == "*" or item == attrs.combined_resource:
            return True
        if attrs.subresource and item == f"*/{attrs.subresource}":
            return True
    return False


def url_matches(rule: dict[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return url_matches(rule, attrs.path)
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.api_group not in groups:
        return False
    if not _resource_matches(rule, attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def subject_applies(subject: dict[str, Any], user: User, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _describe_subject(subject: dict[str, Any], binding_namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or binding_namespace}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


@dataclass(frozen=True)
class Grant:
    """Rules a user holds through one binding, and the words a review gives for that binding."""

    rules: tuple[dict[str, Any], ...]
    source: str


class Authorizer:
    """Rules per (user, namespace) from the stored bindings, cached until an RBAC object changes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[tuple[str, tuple[str, ...], str], tuple[list[Grant], list[str]]] = {}
        store.add_listener(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        if event.group == GROUP:
            self._cache.clear()

    def role_of(self, ref: dict[str, Any], namespace: str) -> tuple[dict[str, Any] | None, str]:
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "ClusterRole":
            role = self.store.peek(GROUP, "clusterroles", "", name)
            missing = f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        else:
            role = self.store.peek(GROUP, "roles", namespace, name)
            missing = f'role.rbac.authorization.k8s.io "{name}" not found'
        return role, ("" if role is not None else missing)

    def grants(self, user: User, namespace: str) -> tuple[list[Grant], list[str]]:
        """(grants, evaluation errors) for the user in the namespace ("" = cluster-wide bindings only)."""
        key = (user.name, user.groups, namespace)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        grants: list[Grant] = []
        errors: list[str] = []
        sources: list[tuple[str, dict[str, Any], str]] = [
            ("ClusterRoleBinding", b, "") for b in self.store.iter(GROUP, "clusterrolebindings")
        ]
        if namespace:
            sources += [
                ("RoleBinding", b, namespace) for b in self.store.iter(GROUP, "rolebindings", namespace)
            ]
        for kind, binding, binding_ns in sources:
            subject = next(
                (s for s in binding.get("subjects") or [] if subject_applies(s, user, binding_ns)), None
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            role, error = self.role_of(ref, binding_ns)
            if role is None:
                errors.append(error)
                continue
            name = binding["metadata"]["name"]
            where = f"{name}/{binding_ns}" if binding_ns else name
            source = (
                f'{kind} "{where}" of {ref.get("kind")} "{ref.get("name")}" to '
                f"{_describe_subject(subject, binding_ns)}"
            )
            grants.append(Grant(tuple(role.get("rules") or []), source))
        self._cache[key] = (grants, errors)
        return grants, errors

    def decide(self, user: User, attrs: Attributes) -> tuple[bool, str, str]:
        """(allowed, reason, evaluation error)."""
        grants, errors = self.grants(user, attrs.namespace if attrs.resource_request else "")
        for grant in grants:
            if any(rule_allows(rule, attrs) for rule in grant.rules):
                return True, f"RBAC: allowed by {grant.source}", ""
        if user.privileged:
            return True, "", ""
        return False, "", "; ".join(errors)

    def allowed(self, user: User, attrs: Attributes) -> bool:
        if user.privileged:
            return True
        return self.decide(user, attrs)[0]

    def rules_for(self, user: User, namespace: str) -> Iterator[dict[str, Any]]:
        for grant in self.grants(user, namespace)[0]:
            yield from grant.rules


def forbidden(user: User, attrs: Attributes, reason: str = "") -> ApiError:
    """The 403 a real API server answers, worded as its `ForbiddenStatusError`."""
    suffix = f": {reason}" if reason else ""
    if not attrs.resource_request:
        message = f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"{suffix}'
        return ApiError(403, "Forbidden", f"forbidden: {message}", details={})
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    message = (
        f'User "{user.name}" cannot {attrs.verb} resource "{attrs.combined_resource}" '
        f'in API group "{attrs.api_group}" {scope}{suffix}'
    )
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    head = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return ApiError(403, "Forbidden", f"{head} is forbidden: {message}", details=details)


# -- reviews ----------------------------------------------------------------------------------
_ONE_OF = "exactly one of nonResourceAttributes or resourceAttributes must be specified"


def _review_attributes(spec: dict[str, Any]) -> Attributes | None:
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return Attributes(
            verb=str(resource.get("verb") or ""),
            resource_request=True,
            api_group=str(resource.get("group") or ""),
            api_version=str(resource.get("version") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            name=str(resource.get("name") or ""),
            namespace=str(resource.get("namespace") or ""),
        )
    other = spec.get("nonResourceAttributes")
    if isinstance(other, dict):
        return Attributes(
            verb=str(other.get("verb") or ""), resource_request=False, path=str(other.get("path") or "")
        )
    return None


def access_review(authorizer: Authorizer, user: User, body: dict[str, Any]) -> dict[str, Any]:
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else None
    attrs = _review_attributes(spec or {})
    if attrs is None:
        raise ApiError(
            422,
            "Invalid",
            'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
            f'Invalid value: "null": {_ONE_OF}',
            details={
                "group": "authorization.k8s.io",
                "kind": "SelfSubjectAccessReview",
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "spec.resourceAttributes",
                        "message": _ONE_OF,
                    }
                ],
            },
        )
    allowed, reason, error = authorizer.decide(user, attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    if error:
        status["evaluationError"] = error
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }


def rules_review(authorizer: Authorizer, user: User, body: dict[str, Any]) -> dict[str, Any]:
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    namespace = str(spec.get("namespace") or "")
    resource_rules: list[dict[str, Any]] = []
    non_resource_rules: list[dict[str, Any]] = []
    for rule in authorizer.rules_for(user, namespace):
        if rule.get("nonResourceURLs"):
            item = {"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])}
            if item not in non_resource_rules:
                non_resource_rules.append(item)
            continue
        item = {
            "verbs": list(rule.get("verbs") or []),
            "apiGroups": list(rule.get("apiGroups") or []),
            "resources": list(rule.get("resources") or []),
        }
        if rule.get("resourceNames"):
            item["resourceNames"] = list(rule["resourceNames"])
        if item not in resource_rules:
            resource_rules.append(item)
    errors = authorizer.grants(user, namespace)[1]
    status: dict[str, Any] = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }
    if errors:
        status["evaluationError"] = "; ".join(errors)
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {"namespace": namespace} if namespace else {},
        "status": status,
    }


# -- bootstrap and aggregation ----------------------------------------------------------------
class AggregationController:
    """Keeps each aggregated ClusterRole's rules the union of the ClusterRoles its selectors pick."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self._busy = False
        api.store.add_listener(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        if event.group == GROUP and event.plural == "clusterroles" and not self._busy:
            self.reconcile()

    def reconcile(self) -> None:
        self._busy = True
        token = current_user.set(None)  # the controller acts as the system, not as the request's user
        try:
            rt = self.api.registry.by_key(GROUP, "clusterroles")
            for _ in range(64):  # aggregated roles may feed each other (view → edit → admin)
                changed = False
                roles = self.api.store.snapshot(GROUP, "clusterroles")
                for role in roles:
                    wanted = rbac_policy.aggregated_rules(role, roles)
                    if wanted is not None and (role.get("rules") or []) != wanted:
                        self.api.commit_update(
                            rt, role, dict(role, rules=wanted), manager=rbac_policy.MANAGER
                        )
                        changed = True
                        break
                if not changed:
                    return
        finally:
            current_user.reset(token)
            self._busy = False


def install_default_policy(api: Any) -> None:
    """Create the built-in ClusterRoles and ClusterRoleBindings (then aggregate the user-facing roles)."""
    roles_rt = api.registry.by_key(GROUP, "clusterroles")
    bindings_rt = api.registry.by_key(GROUP, "clusterrolebindings")
    for role in rbac_policy.cluster_roles():
        api.create(roles_rt, "", role, manager="kube-apiserver")
    for binding in rbac_policy.cluster_role_bindings():
        api.create(bindings_rt, "", binding, manager="kube-apiserver")
