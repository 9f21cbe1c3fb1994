"""Preflight on the Secrets a topology's pods reference. Pure: rendered objects in, findings out.

Tandem holds no permission on Secrets (``clusters.access``: reading them would let it read every
credential in the namespace, and even ``get`` returns the data), so it cannot tell whether a Secret
the pods need exists. A missing one stops the pods on the node, not at apply time: a Secret named by
``env[].valueFrom.secretKeyRef`` or ``envFrom[].secretRef`` gives CreateContainerConfigError
(``secret "x" not found``), a ``secret`` volume FailedMount with the pod stuck in ContainerCreating.
So preflight says what it cannot verify, naming each Secret, where it is referenced and how to check.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kube import labels
from topologies.preflight_facts import WARNING, Finding


def _refs(pod_spec: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(Secret name, how it is used, where) for each non-optional Secret reference of a pod spec."""
    containers = list(pod_spec.get("initContainers") or []) + list(pod_spec.get("containers") or [])
    for container in containers:
        where = f"container {container.get('name', '?')}"
        for source in container.get("envFrom") or []:
            ref = source.get("secretRef")
            if ref and not ref.get("optional"):
                yield str(ref.get("name", "")), "envFrom", where
        for item in container.get("env") or []:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if ref and not ref.get("optional"):
                yield (
                    str(ref.get("name", "")),
                    f"key {ref.get('key', '?')} for env {item.get('name', '?')}",
                    where,
                )
    for volume in pod_spec.get("volumes") or []:
        secret = volume.get("secret")
        if secret and not secret.get("optional"):
            yield str(secret.get("secretName", "")), f"volume {volume.get('name', '?')}", "the pod"
        for source in (volume.get("projected") or {}).get("sources") or []:
            ref = source.get("secret")
            if ref and not ref.get("optional"):
                yield str(ref.get("name", "")), f"volume {volume.get('name', '?')}", "the pod"


def _pod_specs(node: Any, role: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(role, pod spec) for every pod template in the rendered objects."""
    if isinstance(node, dict):
        meta = node.get("metadata")
        if isinstance(meta, dict):
            role = (meta.get("labels") or {}).get(labels.ROLE) or role
        if isinstance(node.get("containers"), list):
            yield role, node
            return
        for value in node.values():
            yield from _pod_specs(value, role)
    elif isinstance(node, list):
        for item in node:
            yield from _pod_specs(item, role)


def check_secret_references(namespace: str, rendered: Iterable[dict[str, Any]]) -> list[Finding]:
    """One warning per Secret the pods reference: Tandem cannot verify it exists (no RBAC on Secrets)."""
    uses: dict[str, dict[str, set[str]]] = {}
    for role, pod_spec in _pod_specs(list(rendered)):
        for name, how, where in _refs(pod_spec):
            entry = uses.setdefault(name, {"roles": set(), "how": set()})
            entry["roles"].add(role or "router")
            entry["how"].add(f"{how} in {where}")
    findings = []
    for name, entry in sorted(uses.items()):
        roles = " and ".join(sorted(entry["roles"]))
        field = f"roles.{next(iter(entry['roles']))}.env" if len(entry["roles"]) == 1 else "env"
        findings.append(
            Finding(
                WARNING,
                "secret_unverified",
                field if entry["roles"] <= {"prefill", "decode"} else "",
                f"cannot verify Secret {name} in namespace {namespace} (Tandem has no RBAC on Secrets): the "
                f"{roles} pods reference it ({'; '.join(sorted(entry['how']))}); if it is missing they "
                "will not start (CreateContainerConfigError)",
                f"check it exists before deploying (kubectl get secret {name} -n {namespace}), or create "
                "it first",
            )
        )
    return findings
