"""RBAC escalation prevention, as the API server's RBAC storage does it: a user may create or change a
Role or ClusterRole only with rules it holds itself (or with the `escalate` verb on it), and bind a
role only when it holds that role's rules (or has `bind` on it). The admin (system:masters) and the
in-process controllers are exempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.rbac import GROUP, Attributes, Authorizer, current_user, url_matches
from sandbox.apiserver.storage import Store


def _atoms(rule: dict[str, Any]) -> Iterator[tuple[str, str, str, str, str]]:
    """(verb, group, resource, name, url) for each single permission a rule names."""
    verbs = rule.get("verbs") or []
    if rule.get("nonResourceURLs"):
        for verb in verbs:
            for url in rule["nonResourceURLs"]:
                yield verb, "", "", "", url
        return
    for verb in verbs:
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for name in rule.get("resourceNames") or [""]:
                    yield verb, group, resource, name, ""


def _covers(owner: dict[str, Any], atom: tuple[str, str, str, str, str]) -> bool:
    verb, group, resource, name, url = atom
    verbs = owner.get("verbs") or []
    if "*" not in verbs and verb not in verbs:
        return False
    if url:
        return url_matches(owner, url)
    groups = owner.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    resources = owner.get("resources") or []
    sub = resource.partition("/")[2]
    if "*" not in resources and resource not in resources and not (sub and f"*/{sub}" in resources):
        return False
    names = owner.get("resourceNames") or []
    return not names or (name != "" and name in names)


def uncovered(owner_rules: Iterable[dict[str, Any]], rules: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules (one permission each) in ``rules`` that no owner rule covers."""
    owners = list(owner_rules)
    missing = []
    for rule in rules:
        for atom in _atoms(rule):
            if not any(_covers(o, atom) for o in owners):
                verb, group, resource, name, url = atom
                if url:
                    missing.append({"nonResourceURLs": [url], "verbs": [verb]})
                else:
                    item: dict[str, Any] = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                    if name:
                        item["resourceNames"] = [name]
                    missing.append(item)
    return missing


def _go_list(values: list[str]) -> str:
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _describe_rules(rules: list[dict[str, Any]]) -> str:
    merged: dict[tuple[str, ...], list[str]] = {}
    for rule in rules:
        key = (
            rule.get("apiGroups", [""])[0] if "apiGroups" in rule else "",
            (rule.get("resources") or rule.get("nonResourceURLs") or [""])[0],
            (rule.get("resourceNames") or [""])[0],
            "url" if "nonResourceURLs" in rule else "",
        )
        merged.setdefault(key, []).extend(v for v in rule["verbs"] if v not in merged.get(key, []))
    out = []
    for (group, resource, name, kind), verbs in merged.items():
        if kind == "url":
            out.append(f"{{NonResourceURLs:{_go_list([resource])}, Verbs:{_go_list(verbs)}}}")
        else:
            names = f", ResourceNames:{_go_list([name])}" if name else ""
            out.append(
                f"{{APIGroups:{_go_list([group])}, Resources:{_go_list([resource])}{names}, "
                f"Verbs:{_go_list(verbs)}}}"
            )
    return "\n".join(out)


class EscalationCheck:
    """RBAC's escalation prevention: a user may create or change a Role or ClusterRole only with rules it
    holds itself (or with `escalate`), and bind a role only if it holds the role's rules (or has `bind`)."""

    KINDS = {"roles", "clusterroles", "rolebindings", "clusterrolebindings"}

    def __init__(self, authorizer: Authorizer, store: Store) -> None:
        self.authorizer = authorizer
        self.store = store

    def __call__(self, rt: Any, obj: dict[str, Any]) -> None:
        user = current_user.get()
        if user is None or user.privileged or rt.group != GROUP or rt.plural not in self.KINDS:
            return
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "") if rt.namespaced else ""
        name = str(meta.get("name") or "")
        if rt.plural in ("roles", "clusterroles"):
            special = Attributes(
                "escalate", True, api_group=GROUP, resource=rt.plural, name=name, namespace=namespace
            )
            rules = obj.get("rules") or []
        else:
            ref = obj.get("roleRef") or {}
            role_plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            special = Attributes(
                "bind",
                True,
                api_group=GROUP,
                resource=role_plural,
                name=str(ref.get("name") or ""),
                namespace=namespace,
            )
            role, _ = self.authorizer.role_of(ref, namespace)
            rules = (role or {}).get("rules") or []
        if self.authorizer.allowed(user, special):
            return
        missing = uncovered(self.authorizer.rules_for(user, namespace), rules)
        if not missing:
            return
        groups = " ".join(json.dumps(g) for g in user.groups)
        qualified = f"{rt.plural}.{GROUP}"
        raise ApiError(
            403,
            "Forbidden",
            f'{qualified} "{name}" is forbidden: user "{user.name}" (groups=[{groups}]) is attempting to '
            f"grant RBAC permissions not currently held:\n{_describe_rules(missing)}",
            details={"name": name, "group": GROUP, "kind": rt.plural},
        )
