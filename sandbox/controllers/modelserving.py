"""ModelServing → serving groups → pods per role, as Kthena's controller names and labels them.

Group `g` of ModelServing `ms` is `ms-g`; replica `i` of role `r` in it has role id `r-i`, an
entry pod `ms-g-r-i-0` (label `modelserving.volcano.sh/entry=true`) and `workerReplicas` worker
pods `ms-g-r-i-1..n`, plus a headless Service named like the entry pod. Every pod carries
`modelserving.volcano.sh/{name,group-name,role,role-id,revision,role-template-hash}` and the template's
own labels. As in Kthena, neither hash counts a role's `replicas` or `maxUnavailable`: changing how many
instances a role runs adds or drains instances of that role and touches no other pod. A template change
replaces one serving group at a time (the others stay available), or with `rolloutStrategy.type:
RoleRollingUpdate` only the instances of the roles whose template changed, at most `maxUnavailable`
(default 1) of each role at a time; scaling `spec.replicas` (also through the scale subresource) adds
or drains whole groups. A lost pod is
recovered per `recoveryPolicy`: `ServingGroupRecreate` recreates its whole group, `RoleRecreate`
(the default) its role instance (entry + workers), `None` nothing.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.objects import Api
from sandbox.controllers.base import Reconciler, is_pod_ready, now_iso, owned_by, owner_reference

GROUP = "workload.serving.volcano.sh"
NAME = "modelserving.volcano.sh/name"
GROUP_NAME = "modelserving.volcano.sh/group-name"
ROLE = "modelserving.volcano.sh/role"
ROLE_ID = "modelserving.volcano.sh/role-id"
ENTRY = "modelserving.volcano.sh/entry"
REVISION = "modelserving.volcano.sh/revision"
ROLE_HASH = "modelserving.volcano.sh/role-template-hash"
# Fields of a role that change how many pods run, not what runs in them: left out of both hashes.
_COUNT_FIELDS = ("replicas", "maxUnavailable")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:10]


def _role_template(role: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in role.items() if k not in _COUNT_FIELDS}


def revision_of(ms: dict[str, Any]) -> str:
    template = dict(ms["spec"].get("template") or {})
    template["roles"] = [_role_template(r) for r in template.get("roles") or []]
    return _digest(template)


def role_hash(role: dict[str, Any]) -> str:
    return _digest(_role_template(role))


def role_rolling(ms: dict[str, Any]) -> bool:
    return ((ms["spec"].get("rolloutStrategy") or {}).get("type")) == "RoleRollingUpdate"


def max_unavailable(role: dict[str, Any]) -> int:
    """The role's maxUnavailable resolved against its replicas (rounded down, at least 1)."""
    value = role.get("maxUnavailable", 1)
    replicas = int(role.get("replicas", 1))
    if isinstance(value, str) and value.endswith("%"):
        return max(1, int(replicas * float(value[:-1]) / 100))
    return max(1, int(value))


def is_stale(ms: dict[str, Any], live: dict[str, Any], desired: dict[str, Any]) -> bool:
    """Whether a live pod runs an older template than its desired form (per role or per revision)."""
    key = ROLE_HASH if role_rolling(ms) else REVISION
    return live["metadata"].get("labels", {}).get(key) != desired["metadata"]["labels"][key]


def desired_pods(ms: dict[str, Any], group_index: int) -> list[dict[str, Any]]:
    """Every pod of one serving group (pure: no ids, no status)."""
    name = ms["metadata"]["name"]
    group_name = f"{name}-{group_index}"
    revision = revision_of(ms)
    pods = []
    for role in (ms["spec"].get("template") or {}).get("roles") or []:
        template_hash = role_hash(role)
        for index in range(int(role.get("replicas", 1))):
            role_id = f"{role['name']}-{index}"
            entry_name = f"{group_name}-{role_id}-0"
            workers = int(role.get("workerReplicas") or 0)
            templates = [(0, role.get("entryTemplate") or {})]
            templates += [(k, role.get("workerTemplate") or {}) for k in range(1, workers + 1)]
            for pod_index, template in templates:
                labels = {
                    NAME: name,
                    GROUP_NAME: group_name,
                    ROLE: role["name"],
                    ROLE_ID: role_id,
                    REVISION: revision,
                    ROLE_HASH: template_hash,
                }
                if pod_index == 0:
                    labels[ENTRY] = "true"
                meta = template.get("metadata") or {}
                labels.update(meta.get("labels") or {})
                spec = copy.deepcopy(template.get("spec") or {})
                if ms["spec"].get("schedulerName"):
                    spec["schedulerName"] = ms["spec"]["schedulerName"]
                env = [
                    {"name": "GROUP_SIZE", "value": str(workers + 1)},
                    {"name": "ENTRY_ADDRESS", "value": f"{entry_name}.{ms['metadata']['namespace']}"},
                    {"name": "WORKER_INDEX", "value": str(pod_index)},
                ]
                for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
                    names = {e["name"] for e in env}
                    container["env"] = [
                        e for e in container.get("env") or [] if e.get("name") not in names
                    ] + env
                pods.append(
                    {
                        "metadata": {
                            "name": f"{group_name}-{role_id}-{pod_index}",
                            "namespace": ms["metadata"]["namespace"],
                            "labels": labels,
                            "annotations": dict(meta.get("annotations") or {}),
                        },
                        "spec": spec,
                    }
                )
    return pods


def _ready(pod: dict[str, Any] | None) -> bool:
    return pod is not None and is_pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")


def recovery_units(pods: list[dict[str, Any]], policy: str) -> list[list[dict[str, Any]]]:
    """What is recreated together when one pod is lost: the group, or each role instance."""
    if policy == "ServingGroupRecreate":
        return [pods]
    units: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        units.setdefault(pod["metadata"]["labels"][ROLE_ID], []).append(pod)
    return list(units.values())


class ModelServingController(Reconciler):
    name = "modelserving-controller"
    watches = ((GROUP, "modelservings"), ("", "pods"))

    def __init__(self, api: Api) -> None:
        super().__init__(api)
        self._created: dict[str, set[str]] = {}  # ModelServing uid → pod names it created

    async def reconcile(self) -> None:
        if ("workload.serving.volcano.sh", "modelservings") not in {
            rt.key for rt in self.api.registry.types()
        }:
            return
        for ms in self.api.store.snapshot(GROUP, "modelservings"):
            if not ms["metadata"].get("deletionTimestamp"):
                self._sync(ms)

    def _sync(self, ms: dict[str, Any]) -> None:
        pods_rt = self.rt("", "pods")
        svc_rt = self.rt("", "services")
        namespace = ms["metadata"]["namespace"]
        uid = ms["metadata"]["uid"]
        replicas = int(ms["spec"].get("replicas", 1))
        existing = {
            p["metadata"]["name"]: p for p in self.api.store.iter("", "pods", namespace) if owned_by(p, uid)
        }
        wanted: dict[int, list[dict[str, Any]]] = {g: desired_pods(ms, g) for g in range(replicas)}
        wanted_names = {p["metadata"]["name"] for pods in wanted.values() for p in pods}
        # Scale down / removed roles: drain whatever is no longer wanted.
        for name, pod in existing.items():
            if name not in wanted_names and not pod["metadata"].get("deletionTimestamp"):
                self._delete(pods_rt, namespace, name)
        group_ready: dict[int, bool] = {}
        group_updated: dict[int, bool] = {}
        for g, pods in wanted.items():
            group_ready[g] = all(_ready(existing.get(p["metadata"]["name"])) for p in pods)
            group_updated[g] = all(
                (live := existing.get(p["metadata"]["name"])) is not None and not is_stale(ms, live, p)
                for p in pods
            )
        if role_rolling(ms):
            self._roll_roles(ms, wanted, existing)
        else:
            # Rolling replacement: recreate one outdated group at a time while the others are ready.
            outdated = [
                g
                for g in wanted
                if not group_updated[g] and any(existing.get(p["metadata"]["name"]) for p in wanted[g])
            ]
            others_ready = all(group_ready[g] for g in wanted if g not in outdated)
            if outdated and others_ready:
                self._replace_stale(ms, wanted[outdated[0]], existing)
        created = self._created.setdefault(uid, set())
        policy = ms["spec"].get("recoveryPolicy", "RoleRecreate")
        for pods in wanted.values():
            for unit in recovery_units(pods, policy):
                names = [p["metadata"]["name"] for p in unit]
                lost = [n for n in names if n not in existing and n in created]
                if lost and policy == "None":
                    unit = [p for p in unit if p["metadata"]["name"] not in lost]
                elif lost:
                    # A pod of this unit is gone: recreate the whole unit (role instance or group).
                    for name in names:
                        live = existing.get(name)
                        if live is not None and not live["metadata"].get("deletionTimestamp"):
                            self._delete(pods_rt, namespace, name)
                    if any(n in existing for n in names):
                        continue
                    created.difference_update(names)
                for pod in unit:
                    if pod["metadata"]["name"] not in existing:
                        self._create(pods_rt, svc_rt, ms, pod)
        self._status(ms, group_ready, group_updated, replicas)

    def _replace_stale(
        self, ms: dict[str, Any], pods: list[dict[str, Any]], existing: dict[str, dict[str, Any]]
    ) -> None:
        """Delete the pods of `pods` that run an older template; the sync recreates them."""
        for pod in pods:
            live = existing.get(pod["metadata"]["name"])
            if live is not None and not live["metadata"].get("deletionTimestamp") and is_stale(ms, live, pod):
                self._delete(self.rt("", "pods"), ms["metadata"]["namespace"], pod["metadata"]["name"])

    def _roll_roles(
        self, ms: dict[str, Any], wanted: dict[int, list[dict[str, Any]]], existing: dict[str, dict[str, Any]]
    ) -> None:
        """RoleRollingUpdate: replace outdated instances of each role, at most maxUnavailable at a time;
        roles whose template did not change are left alone."""
        roles = {r["name"]: r for r in (ms["spec"].get("template") or {}).get("roles") or []}
        instances: dict[str, list[list[dict[str, Any]]]] = {}
        for pods in wanted.values():
            by_role_id: dict[str, list[dict[str, Any]]] = {}
            for pod in pods:
                by_role_id.setdefault(pod["metadata"]["labels"][ROLE_ID], []).append(pod)
            for instance in by_role_id.values():
                instances.setdefault(instance[0]["metadata"]["labels"][ROLE], []).append(instance)
        for name, units in instances.items():

            def unit_ready(unit: list[dict[str, Any]]) -> bool:
                return all(_ready(existing.get(p["metadata"]["name"])) for p in unit)

            def unit_stale(unit: list[dict[str, Any]]) -> bool:
                return any(
                    (live := existing.get(p["metadata"]["name"])) is not None and is_stale(ms, live, p)
                    for p in unit
                )

            budget = max_unavailable(roles[name]) - sum(1 for u in units if not unit_ready(u))
            for unit in units:
                if not unit_stale(unit):
                    continue
                if unit_ready(unit):  # replacing a serving instance costs availability
                    if budget <= 0:
                        continue
                    budget -= 1
                self._replace_stale(ms, unit, existing)

    def _create(self, pods_rt: Any, svc_rt: Any, ms: dict[str, Any], pod: dict[str, Any]) -> None:
        pod["metadata"]["ownerReferences"] = [owner_reference(ms)]
        try:
            self.api.create(pods_rt, ms["metadata"]["namespace"], pod, manager=self.name)
        except ApiError:
            return
        self._created.setdefault(ms["metadata"]["uid"], set()).add(pod["metadata"]["name"])
        if pod["metadata"]["labels"].get(ENTRY) == "true":
            self._headless_service(svc_rt, ms, pod)

    def _delete(self, rt: Any, namespace: str, name: str) -> None:
        """Deliberate deletions (scale-down, rollout, recovery) are not losses to recover from."""
        for names in self._created.values():
            names.discard(name)
        try:
            self.api.delete(rt, namespace, name)
        except ApiError:
            return

    def _headless_service(self, rt: Any, ms: dict[str, Any], pod: dict[str, Any]) -> None:
        labels = pod["metadata"]["labels"]
        service = {
            "metadata": {
                "name": pod["metadata"]["name"],
                "namespace": pod["metadata"]["namespace"],
                "labels": {k: labels[k] for k in (NAME, GROUP_NAME, ROLE, ROLE_ID)},
                "ownerReferences": [owner_reference(ms)],
            },
            "spec": {
                "clusterIP": "None",
                "selector": {k: labels[k] for k in (GROUP_NAME, ROLE_ID)},
                "publishNotReadyAddresses": True,
            },
        }
        if self.api.find(rt, pod["metadata"]["namespace"], pod["metadata"]["name"]) is None:
            try:
                self.api.create(rt, pod["metadata"]["namespace"], service, manager=self.name)
            except ApiError:
                return

    def _status(
        self, ms: dict[str, Any], ready: dict[int, bool], updated: dict[int, bool], replicas: int
    ) -> None:
        rt = self.rt(GROUP, "modelservings")
        name = ms["metadata"]["name"]
        progressing = sorted(g for g, ok in ready.items() if not ok)
        previous = (ms.get("status") or {}).get("conditions") or []
        if progressing:
            cond_type, reason, message = (
                "Progressing",
                "GroupProgressing",
                f"Some groups are progressing: {progressing}",
            )
        else:
            cond_type, reason, message = "Available", "AllGroupsReady", "All Serving groups are ready"
        conditions = []
        for kind in ("Available", "Progressing"):
            before = next((c for c in previous if c.get("type") == kind), None)
            flag = "True" if kind == cond_type else "False"
            if before is None and flag == "False":
                continue
            keep = (
                before is not None
                and before.get("status") == flag
                and before.get("message") == (message if flag == "True" else before.get("message"))
            )
            conditions.append(
                before
                if keep and before is not None
                else {
                    "type": kind,
                    "status": flag,
                    "reason": reason if flag == "True" else (before or {}).get("reason", reason),
                    "message": message if flag == "True" else (before or {}).get("message", message),
                    "lastTransitionTime": now_iso(),
                    "observedGeneration": ms["metadata"].get("generation", 1),
                }
            )
        revision = revision_of(ms)
        status = {
            "observedGeneration": ms["metadata"].get("generation", 1),
            "replicas": replicas,
            "currentReplicas": replicas,
            "updatedReplicas": sum(1 for ok in updated.values() if ok),
            "availableReplicas": sum(1 for ok in ready.values() if ok),
            "currentRevision": revision,
            "updateRevision": revision,
            "labelSelector": f"{NAME}={name}",
            "conditions": conditions,
        }
        self.api.write_status(rt, ms, status, self.name)
