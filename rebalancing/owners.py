"""Who else sets the replica counts of a topology's roles, and what auto mode does about it (pure).

Auto mode is one owner of the prefill/decode counts. Before it starts and on every tick,
``kube.replica_owners`` reads the topology's workloads (with their ``metadata.managedFields``) and the
autoscalers of its namespace; these functions decide from those objects alone:

- ``controllers``: a Kthena ``AutoscalingPolicy``, an ``autoscaling/v2`` HorizontalPodAutoscaler or a KEDA
  ``ScaledObject`` that targets a workload of the topology, and GitOps tools (Argo CD, Flux) whose field
  manager owns a replica field of it. Any of these makes auto refuse to start, or pause.
- ``gitops_notes``: an Argo CD / Flux ownership mark on a workload whose replica fields the tool does not own
  (it was told to leave them alone): shown, not blocking.
- ``replica_edits``: a replica field whose value changed since the last tick and whose latest owner in
  ``managedFields`` is not Tandem (``kubectl scale``, a script, a controller Tandem cannot see): auto pauses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Tandem writes with the field manager "tandem" (kube.labels.FIELD_MANAGER); writes made before it named
# one explicitly carry its User-Agent's product, as a real API server derives the manager from it.
TANDEM_MANAGERS = frozenset({"tandem", "tandem-controlplane"})
KTHENA_API = "workload.serving.volcano.sh/v1alpha1"
# Argo CD tracks by the argocd.argoproj.io/tracking-id annotation (the default method since 3.0) or by
# the app.kubernetes.io/instance label (the "label" method); Flux's kustomize- and helm-controller label what
# they apply with <group>/name and <group>/namespace.
ARGO_ANNOTATION = "argocd.argoproj.io/tracking-id"
ARGO_LABEL = "app.kubernetes.io/instance"
FLUX_MARKS = {
    "kustomize.toolkit.fluxcd.io": ("Flux Kustomization", "kustomize-controller"),
    "helm.toolkit.fluxcd.io": ("Flux HelmRelease", "helm-controller"),
}
ARGO_MANAGERS = ("argocd-controller", "argocd-application-controller")
KEDA_PAUSED = "autoscaling.keda.sh/paused"


@dataclass(frozen=True)
class Workload:
    """A live object of the topology that carries role replicas (a ModelServing, or one role's Deployment)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    roles: tuple[str, ...]
    obj: dict[str, Any] | None = None  # None: not in the cluster (yet)

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class OtherOwner:
    kind: str  # kthena_policy | hpa | keda | argocd | flux | field_manager
    name: str  # "HPA default/llama-decode", "kubectl"
    roles: tuple[str, ...]
    message: str
    remedy: str
    blocking: bool = True
    handoff: str = ""  # a Kthena policy Tandem can hand its ratio bounds to: its name
    change: dict[str, Any] = field(default_factory=dict)  # field_manager: {role: [from, to]}

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["roles"] = list(self.roles)
        return out

    @property
    def text(self) -> str:
        return f"{self.message}: {self.remedy}"


def _roles_words(roles: tuple[str, ...] | list[str]) -> str:
    roles = list(roles)
    if not roles:
        return "no"
    return " and ".join(roles)


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def _targets(ref: dict[str, Any], namespace: str, workload: Workload, default_kind: str) -> bool:
    kind = str(ref.get("kind") or default_kind)
    api_version = str(ref.get("apiVersion") or "")
    group = api_version.split("/")[0] if "/" in api_version else ""
    own_group = workload.api_version.split("/")[0] if "/" in workload.api_version else ""
    return (
        str(ref.get("name") or "") == workload.name
        and kind == workload.kind
        and str(ref.get("namespace") or namespace) == workload.namespace
        and (not api_version or group == own_group)
    )


def _hpa(obj: dict[str, Any], workloads: list[Workload]) -> OtherOwner | None:
    meta = _meta(obj)
    if any(o.get("kind") == "ScaledObject" for o in meta.get("ownerReferences") or []):
        return None  # KEDA's own HPA: the ScaledObject is named instead
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    hit = [w for w in workloads if _targets(ref, ns, w, "")]
    if not hit:
        return None
    spec = obj.get("spec") or {}
    roles = tuple(r for w in hit for r in w.roles)
    bounds = f"{spec.get('minReplicas', 1)}–{spec.get('maxReplicas', '?')}"
    return OtherOwner(
        kind="hpa",
        name=f"HPA {ns}/{name}",
        roles=roles,
        message=f"HPA {ns}/{name} scales the {_roles_words(roles)} replicas ({hit[0].ref}, {bounds})",
        remedy=f"remove it (kubectl delete hpa -n {ns} {name}) or switch Tandem to advisory",
    )


def _keda(obj: dict[str, Any], workloads: list[Workload]) -> OtherOwner | None:
    meta = _meta(obj)
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    hit = [w for w in workloads if _targets(ref, ns, w, "Deployment")]
    if not hit:
        return None
    roles = tuple(r for w in hit for r in w.roles)
    paused = str((meta.get("annotations") or {}).get(KEDA_PAUSED, "")).lower() == "true"
    message = f"KEDA ScaledObject {ns}/{name} scales the {_roles_words(roles)} replicas ({hit[0].ref})"
    if paused:
        return OtherOwner(
            kind="keda",
            name=f"ScaledObject {ns}/{name}",
            roles=roles,
            message=message + f', paused ({KEDA_PAUSED}: "true")',
            remedy="it scales again when unpaused: delete it if Tandem is to own the counts",
            blocking=False,
        )
    return OtherOwner(
        kind="keda",
        name=f"ScaledObject {ns}/{name}",
        roles=roles,
        message=message,
        remedy=f"remove it (kubectl delete scaledobject -n {ns} {name}), pause it with the annotation "
        f'{KEDA_PAUSED}: "true", or switch Tandem to advisory',
    )


def _policy_targets(spec: dict[str, Any]) -> list[tuple[dict[str, Any], list[str] | None]]:
    """(targetRef, the roles it scales or None for the whole ModelServing) of each target of a policy."""
    out: list[tuple[dict[str, Any], list[str] | None]] = []
    dis = spec.get("disaggregatedTarget") or {}
    if dis.get("targetRef"):
        out.append((dis["targetRef"], sorted((dis.get("roles") or {}).keys())))
    homo = spec.get("homogeneousTarget") or {}
    if (homo.get("target") or {}).get("targetRef"):
        out.append((homo["target"]["targetRef"], None))
    for param in (spec.get("heterogeneousTarget") or {}).get("params") or []:
        if ((param or {}).get("target") or {}).get("targetRef"):
            out.append((param["target"]["targetRef"], None))
    return out


def _kthena(obj: dict[str, Any], workloads: list[Workload]) -> OtherOwner | None:
    meta = _meta(obj)
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    spec = obj.get("spec") or {}
    for ref, scaled in _policy_targets(spec):
        for w in workloads:
            if not _targets(ref, ns, w, "ModelServing"):
                continue
            roles = tuple(r for r in w.roles if scaled is None or r in scaled)
            if not roles:
                continue
            pair = scaled is not None and {"prefill", "decode"} <= set(roles)
            what = "the whole ModelServing" if scaled is None else f"the {_roles_words(roles)} replicas"
            remedy = (
                "hand Tandem's ratio bounds to its ratioConstraint (Hand over to Kthena: Tandem writes "
                "minRatio/maxRatio there and stays advisory), or delete the policy"
                if pair
                else f"delete the policy (kubectl delete autoscalingpolicy -n {ns} {name}) or switch Tandem "
                "to advisory"
            )
            return OtherOwner(
                kind="kthena_policy",
                name=f"AutoscalingPolicy {ns}/{name}",
                roles=roles,
                message=f"Kthena AutoscalingPolicy {ns}/{name} scales {what} ({w.ref})",
                remedy=remedy,
                handoff=name if pair else "",
            )
    return None


def controllers(workloads: list[Workload], autoscalers: list[dict[str, Any]]) -> list[OtherOwner]:
    """The autoscalers that target a workload of the topology, and GitOps tools owning its replicas."""
    found: list[OtherOwner] = []
    for obj in autoscalers:
        kind = str(obj.get("kind", ""))
        reader = {"HorizontalPodAutoscaler": _hpa, "ScaledObject": _keda, "AutoscalingPolicy": _kthena}.get(
            kind
        )
        owner = reader(obj, workloads) if reader else None
        if owner is not None:
            found.append(owner)
    return found + [o for o in gitops(workloads) if o.blocking]


# --- managedFields ------------------------------------------------------------------------------------


def replica_values(workload: Workload) -> dict[str, int]:
    """The replica fields of a live workload: ``spec.replicas`` and, on a ModelServing, each role's."""
    if workload.obj is None:
        return {}
    spec = workload.obj.get("spec") or {}
    out = {"spec.replicas": int(spec.get("replicas", 1) or 0)}
    if workload.kind == "ModelServing":
        for role in (spec.get("template") or {}).get("roles") or []:
            if isinstance(role, dict) and role.get("name") in workload.roles:
                out[f"roles.{role['name']}.replicas"] = int(role.get("replicas", 1) or 0)
    return out


def role_counts(workload: Workload, values: dict[str, int]) -> dict[str, int]:
    """Instances per role from a workload's replica fields (a ModelServing: groups × the role's replicas)."""
    if workload.kind != "ModelServing":
        return {r: values.get("spec.replicas", 0) for r in workload.roles}
    groups = values.get("spec.replicas", 1)
    return {r: groups * values.get(f"roles.{r}.replicas", 0) for r in workload.roles}


def _paths(fields: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for key, child in (fields or {}).items():
        path = (*prefix, key)
        out.extend(_paths(child, path) if isinstance(child, dict) and child else [path])
    return out


def _covers(owned: tuple[str, ...], value_path: str) -> bool:
    """Does a managedFields path (``("f:spec", "f:replicas")``) own the replica field ``value_path``?"""
    if value_path == "spec.replicas":
        return owned[:2] == ("f:spec", "f:replicas")
    role = value_path.split(".")[1]
    if owned[:3] != ("f:spec", "f:template", "f:roles"):
        return False
    if len(owned) == 3:
        return True  # the roles list is atomic: whoever set it owns every role's replicas
    item = owned[3]  # k:{"name":"decode"} where the list is a map by name
    return f'"{role}"' in item and (len(owned) == 4 or "f:replicas" in owned[4:])


def field_owners(obj: dict[str, Any] | None, value_path: str) -> list[dict[str, Any]]:
    """The managedFields entries owning a replica field, latest first."""
    entries = [
        e
        for e in _meta(obj).get("managedFields") or []
        if any(_covers(p, value_path) for p in _paths(e.get("fieldsV1") or {}))
    ]
    return sorted(entries, key=lambda e: str(e.get("time") or ""), reverse=True)


def gitops(workloads: list[Workload]) -> list[OtherOwner]:
    """GitOps ownership marks: blocking when the tool's field manager owns a replica field."""
    out: list[OtherOwner] = []
    for w in workloads:
        meta = _meta(w.obj)
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        marks: list[tuple[str, str, tuple[str, ...], str]] = []
        if annotations.get(ARGO_ANNOTATION):
            app = str(annotations[ARGO_ANNOTATION]).split(":", 1)[0]
            marks.append(("argocd", f"Argo CD Application {app}", ARGO_MANAGERS, ARGO_ANNOTATION))
        elif labels.get(ARGO_LABEL):
            app = str(labels[ARGO_LABEL])
            marks.append(("argocd", f"Argo CD Application {app}", ARGO_MANAGERS, ARGO_LABEL))
        for group, (what, manager) in FLUX_MARKS.items():
            if labels.get(f"{group}/name"):
                where = f"{labels.get(f'{group}/namespace', '')}/{labels[f'{group}/name']}"
                marks.append(("flux", f"{what} {where}", (manager,), f"{group}/name"))
        managers = {str(e.get("manager")) for path in replica_values(w) for e in field_owners(w.obj, path)}
        for kind, name, tool_managers, mark in marks:
            owns = bool(managers & set(tool_managers))
            fix = (
                "exclude the replicas from its sync (Argo CD: ignoreDifferences on the replica fields with "
                "RespectIgnoreDifferences=true; Flux: drop replicas from the manifest), or switch Tandem to "
                "advisory"
            )
            out.append(
                OtherOwner(
                    kind=kind,
                    name=name,
                    roles=w.roles,
                    message=f"{name} manages {w.ref} ({mark})"
                    + (" and owns its replica fields" if owns else ", but not its replica fields"),
                    remedy=fix if owns else "a sync that sets them again would pause auto mode",
                    blocking=owns,
                )
            )
    return out


def seen(workloads: list[Workload]) -> dict[str, dict[str, int]]:
    """What a tick remembers to notice the next change: {workload ref: {replica field: value}}."""
    return {w.ref: replica_values(w) for w in workloads if w.obj is not None}


def replica_edits(workloads: list[Workload], before: dict[str, dict[str, int]]) -> list[OtherOwner]:
    """Replica fields changed since ``before`` whose latest owner is not Tandem, one owner per workload."""
    out: list[OtherOwner] = []
    for w in workloads:
        old = before.get(w.ref)
        if w.obj is None or not old:
            continue
        now = replica_values(w)
        changed = [p for p in now if p in old and old[p] != now[p]]
        if not changed:
            continue
        owners = [field_owners(w.obj, p) for p in changed]
        latest = max((o[0] for o in owners if o), key=lambda e: str(e.get("time") or ""), default=None)
        if latest is None or str(latest.get("manager") or "") in TANDEM_MANAGERS:
            continue  # Tandem's own change (or nobody's the server recorded)
        manager = str(latest.get("manager") or "unknown")
        counts_old, counts_new = role_counts(w, {**now, **old}), role_counts(w, now)
        change = {r: [counts_old[r], counts_new[r]] for r in w.roles if counts_old[r] != counts_new[r]}
        fields = ", ".join(f"{p} {old[p]} → {now[p]}" for p in changed)
        roles = "; ".join(f"{r} {a} → {b}" for r, (a, b) in change.items()) or "no role count changed"
        how = str(latest.get("operation") or "Update") + (
            f" via /{latest['subresource']}" if latest.get("subresource") else ""
        )
        out.append(
            OtherOwner(
                kind="field_manager",
                name=manager,
                roles=tuple(change) or w.roles,
                message=f"{manager} changed {w.ref} {fields} ({roles}; {how} at {latest.get('time', '?')})",
                remedy="set the split in Tandem instead (Set the ratio), stop whatever keeps scaling it, "
                "then set the planner to auto again to resume",
                change=change,
            )
        )
    return out


@dataclass(frozen=True)
class OwnerCheck:
    """What a check found: every other owner (blocking or not) and, when auto may not act, why."""

    owners: tuple[OtherOwner, ...]

    @property
    def blocking(self) -> tuple[OtherOwner, ...]:
        return tuple(o for o in self.owners if o.blocking)

    @property
    def reason(self) -> str:
        return "; ".join(o.text for o in self.blocking)

    def as_list(self) -> list[dict[str, Any]]:
        return [o.as_dict() for o in self.owners]


def check_start(workloads: list[Workload], autoscalers: list[dict[str, Any]]) -> OwnerCheck:
    """Before auto starts: other controllers refuse it; GitOps marks without the replicas are noted."""
    found = controllers(workloads, autoscalers)
    notes = [o for o in gitops(workloads) if not o.blocking]
    return OwnerCheck(tuple(found + notes))


def check_tick(
    workloads: list[Workload], autoscalers: list[dict[str, Any]], before: dict[str, dict[str, int]]
) -> OwnerCheck:
    """On a tick: the start check plus replica edits by other field managers since the last tick."""
    start = check_start(workloads, autoscalers)
    return OwnerCheck(tuple(replica_edits(workloads, before)) + start.owners)
