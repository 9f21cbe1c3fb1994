"""Plain Deployments (one per role) and their Services → a spec draft. Pure."""

from __future__ import annotations

from typing import Any

from kube import labels
from topologies.importing import assemble
from topologies.importing.pod import RoleDraft, read_role
from topologies.importing.report import Report

ROLE_LABELS = (labels.ROLE, labels.KTHENA_ROLE, "role", "app.kubernetes.io/component")


def _where(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')}/{meta.get('namespace', 'default')}/{meta.get('name')}"


def role_of(deployment: dict[str, Any]) -> str:
    """prefill | decode | router | "" from labels, the name's suffix, or the engine's own flags."""
    meta = deployment.get("metadata") or {}
    pod_labels = (((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "labels"
    ) or {}
    for source in (meta.get("labels") or {}, pod_labels):
        for key in ROLE_LABELS:
            if source.get(key) in ("prefill", "decode", "router"):
                return str(source[key])
    name = str(meta.get("name", ""))
    for role in ("prefill", "decode", "router"):
        if name.endswith(f"-{role}") or name.endswith(f"-{role[0]}"):
            return role
    text = str(deployment)
    if "kv_producer" in text or "'--disaggregation-mode', 'prefill'" in text:
        return "prefill"
    if "kv_consumer" in text or "'--disaggregation-mode', 'decode'" in text:
        return "decode"
    return ""


def _base_name(names: list[str]) -> str:
    for suffix in ("-prefill", "-decode", "-p", "-d"):
        names = [n[: -len(suffix)] if n.endswith(suffix) else n for n in names]
    return min(names, key=len) if names else ""


def draft(docs: list[dict[str, Any]], report: Report) -> tuple[dict[str, Any], dict[str, list[str]]]:
    roles: dict[str, RoleDraft] = {}
    replicas: dict[str, int] = {}
    names: list[str] = []
    namespace = "default"
    for doc in docs:
        kind = doc.get("kind")
        where = _where(doc)
        if kind == "Service":
            report.mapped(where, "", "Tandem renders a headless Service per role and the router's Service")
            continue
        if kind in ("ServiceAccount", "Role", "RoleBinding") and role_of(doc) == "router":
            report.mapped(where, "", f"Tandem renders the router's {kind} (it reads the role pods)")
            continue
        if kind != "Deployment":
            report.unsupported(where, f"{kind} is not part of a topology; keep applying it yourself")
            continue
        role = role_of(doc)
        if role == "router":
            report.mapped(where, "routing", "Tandem renders its own router for plain Deployments")
            continue
        if role not in ("prefill", "decode") or role in roles:
            why = "a second Deployment for that role" if role in roles else "no prefill/decode role found"
            report.unsupported(where, f"{why}; label it tandem.io/role=prefill or decode")
            continue
        meta = doc.get("metadata") or {}
        names.append(str(meta.get("name", "")))
        namespace = str(meta.get("namespace") or namespace)
        spec = doc.get("spec") or {}
        pod = (spec.get("template") or {}).get("spec") or {}
        roles[role] = read_role(pod, role, where, report, (spec.get("template") or {}).get("metadata"))
        line = roles[role].line
        if line is not None and line.kv_transfer:
            report.kv_transfer[role] = line.kv_transfer
        replicas[role] = int(spec.get("replicas", 1) or 0)
        report.mapped(f"{where}.spec.replicas", f"roles.{role}.replicas", str(replicas[role]))
        for key in sorted(set(spec) - {"replicas", "selector", "template", "strategy"}):
            report.unsupported(f"{where}.spec.{key}", f"{key} is not part of a topology spec")
    if not roles:
        return {}, {
            "yaml": [
                "no prefill or decode Deployment found; label them tandem.io/role=prefill|decode "
                "or name them <name>-prefill and <name>-decode"
            ]
        }
    name = _base_name(names)
    report.mapped("Deployment", "name", f"topology {name} in namespace {namespace}")
    return (
        assemble.spec_draft(
            name=name,
            namespace=namespace,
            roles=roles,
            replicas=replicas,
            backend="deployments",
            router_connector="",
            report=report,
        ),
        {},
    )
