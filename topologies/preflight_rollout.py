"""Preflight: will a role stop serving while this revision rolls out over the deployed one? Pure.

- Plain Deployments roll with ``maxSurge: 1, maxUnavailable: 0``: the new pod must be Ready before an
  old one goes, so a role never drops below its replicas, but the surge pod needs room. Without room
  (accelerators all taken) the rollout cannot start a new pod: the old pods keep serving and the deploy
  waits, then fails and rolls back. Preflight says so before the deploy.
- Kthena's ModelServing has no surge (``RoleRollingUpdate`` replaces at most ``maxUnavailable``, at least
  1, of a role's instances at a time). A role with several replicas keeps the rest serving; a role with
  one replica is down until its new pod is Ready. Preflight says so before the deploy.
Only roles whose pod template changes are replaced; a scale alone replaces nothing.

An object whose immutable field changes (a ModelRoute's ``modelName``) is deleted and created again by
the deploy; preflight says so, and what that costs, before the deploy.
"""

from __future__ import annotations

from typing import Any

from kube import labels
from kube.immutable import immutable_changes
from topologies.preflight_facts import WARNING, ClusterFacts, Finding
from topologies.spec import TopologySpec

ROLES = ("prefill", "decode")


def role_template_hashes(objects: list[dict[str, Any]]) -> dict[str, str]:
    """Role → the content hash of its pod template, from rendered objects."""
    found: dict[str, str] = {}
    for obj in objects:
        if obj.get("kind") == "ModelServing":
            for role in obj["spec"]["template"]["roles"]:
                template = role.get("entryTemplate") or {}
                found[role["name"]] = ((template.get("metadata") or {}).get("labels") or {}).get(
                    labels.TEMPLATE_HASH, ""
                )
        elif obj.get("kind") == "Deployment":
            template_labels = obj["spec"]["template"]["metadata"].get("labels") or {}
            role = template_labels.get(labels.ROLE)
            if role in ROLES:
                found[role] = template_labels.get(labels.TEMPLATE_HASH, "")
    return found


def _surge_room(spec: TopologySpec, role_name: str, facts: ClusterFacts) -> bool:
    role = spec.role(role_name)
    if role.accelerator_count == 0:
        return True
    resource = role.accelerator_resource
    for node in facts.nodes:
        selected = all(node.labels.get(k) == v for k, v in role.node_selector.items())
        # The role's own running pods stay up during a surge: their accelerators are not free.
        if node.schedulable and selected and node.free(resource) >= role.accelerator_count:
            return True
    return False


def check_rollout_availability(
    spec: TopologySpec,
    facts: ClusterFacts,
    *,
    rendered: list[dict[str, Any]],
    deployed: TopologySpec | None,
    deployed_rendered: list[dict[str, Any]],
) -> list[Finding]:
    if deployed is None:
        return []  # a first deploy takes nothing down
    new, old = role_template_hashes(rendered), role_template_hashes(deployed_rendered)
    out = _recreated_objects(rendered, deployed_rendered)
    for role_name in ROLES:
        role, before = spec.role(role_name), deployed.role(role_name)
        if role.replicas == 0 or before.replicas == 0 or role_name not in new or role_name not in old:
            continue
        if new[role_name] == old[role_name] or spec.backend != deployed.backend:
            continue
        path = f"roles.{role_name}"
        if spec.backend == "kthena" and before.replicas == 1:
            out.append(
                Finding(
                    WARNING,
                    "rollout_role_unavailable",
                    f"{path}.replicas",
                    f"{role_name} will be unavailable during this rollout: its only pod is replaced in "
                    f"place (Kthena rolls a role over without surge, at least one instance at a time), "
                    f"so requests fail until the new {role_name} pod is Ready",
                    f"run 2 or more {role_name} replicas to keep it serving through rollouts, or deploy "
                    "when a short outage is acceptable",
                )
            )
        elif spec.backend == "deployments" and not _surge_room(spec, role_name, facts):
            out.append(
                Finding(
                    WARNING,
                    "rollout_no_surge_room",
                    f"{path}.accelerator_count",
                    f"no node has {role.accelerator_count} `{role.accelerator_resource}` free for the "
                    f"{role_name} surge pod: the rollout starts a new pod before stopping an old one, so "
                    "it waits (the old pods keep serving) and the deploy fails at its ready timeout",
                    f"free {role.accelerator_count} accelerators on a node (or add one) before deploying, "
                    f"or scale {role_name} down by one first",
                )
            )
    return out


def _recreated_objects(
    rendered: list[dict[str, Any]], deployed_rendered: list[dict[str, Any]]
) -> list[Finding]:
    running = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in deployed_rendered}
    out = []
    for obj in rendered:
        name = (obj.get("metadata") or {}).get("name")
        changes = immutable_changes(running.get((obj.get("kind"), name)), obj)
        if not changes:
            continue
        field = "routing.model_name" if obj.get("kind") == "ModelRoute" else "name"
        out.append(
            Finding(
                WARNING,
                "recreated_object",
                field,
                f"{obj['kind']}/{name} will be deleted and created again: {', '.join(changes)} cannot "
                "change in place (the API server refuses it); until it is back, requests it routes fail",
                "deploy when a short routing gap is acceptable, or keep the old value",
            )
        )
    return out
