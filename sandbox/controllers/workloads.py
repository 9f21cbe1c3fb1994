"""Deployment → ReplicaSets (one per pod-template hash, rolling replacement) → Pods, with status."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import secrets
from typing import Any

from sandbox.apiserver.errors import ApiError
from sandbox.apiserver.objects import Api
from sandbox.apiserver.selectors import labels_match, selector_from_match_labels
from sandbox.controllers.base import (
    EventRecorder,
    Reconciler,
    is_pod_ready,
    now_iso,
    owned_by,
    owner_reference,
)

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return "".join(_ALPHABET[int(digest[i : i + 2], 16) % len(_ALPHABET)] for i in range(0, 20, 2))


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = total * float(value[:-1]) / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value or 0)


def rolling_bounds(deployment: dict[str, Any]) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) resolved against spec.replicas, never both zero."""
    desired = int(deployment["spec"].get("replicas", 1))
    strategy = deployment["spec"].get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    surge = _int_or_percent(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = _int_or_percent(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


class ReplicaSetController(Reconciler):
    name = "replicaset-controller"
    watches = (("apps", "replicasets"), ("", "pods"))

    def __init__(self, api: Api, events: EventRecorder) -> None:
        super().__init__(api)
        self.events = events

    async def reconcile(self) -> None:
        rs_rt = self.rt("apps", "replicasets")
        pods_rt = self.rt("", "pods")
        for rs in self.api.store.snapshot("apps", "replicasets"):
            if rs["metadata"].get("deletionTimestamp"):
                continue
            namespace = rs["metadata"]["namespace"]
            uid = rs["metadata"]["uid"]
            pods = [p for p in self.api.store.iter("", "pods", namespace) if owned_by(p, uid)]
            active = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            desired = int(rs["spec"].get("replicas", 1))
            if len(active) < desired:
                for _ in range(desired - len(active)):
                    self._create_pod(pods_rt, rs)
            elif len(active) > desired:
                # Unscheduled first, then not ready, then the newest.
                ranked = sorted(
                    active,
                    key=lambda p: (
                        bool(p["spec"].get("nodeName")),
                        is_pod_ready(p),
                        p["metadata"].get("creationTimestamp", ""),
                    ),
                )
                for pod in ranked[: len(active) - desired]:
                    try:
                        self.api.delete(pods_rt, namespace, pod["metadata"]["name"])
                    except ApiError:
                        continue
                    self.events.record(
                        rs, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}", component=self.name
                    )
            ready = [p for p in active if is_pod_ready(p)]
            selector = selector_from_match_labels(rs["spec"].get("selector"))
            status = {
                "replicas": len(active),
                "fullyLabeledReplicas": sum(
                    1 for p in active if labels_match(selector, p["metadata"].get("labels"))
                ),
                "readyReplicas": len(ready),
                "availableReplicas": len(ready),
                "observedGeneration": rs["metadata"].get("generation", 1),
            }
            self.api.write_status(rs_rt, rs, status, self.name)

    def _create_pod(self, rt: Any, rs: dict[str, Any]) -> None:
        template = copy.deepcopy(rs["spec"]["template"])
        meta = template.get("metadata") or {}
        suffix = "".join(secrets.choice(_ALPHABET) for _ in range(5))
        pod = {
            "metadata": {
                "name": f"{rs['metadata']['name']}-{suffix}",
                "namespace": rs["metadata"]["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [owner_reference(rs)],
            },
            "spec": template.get("spec") or {},
        }
        self.api.create(rt, rs["metadata"]["namespace"], pod, manager="kube-controller-manager")
        self.events.record(
            rs, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}", component=self.name
        )


class DeploymentController(Reconciler):
    name = "deployment-controller"
    watches = (("apps", "deployments"), ("apps", "replicasets"))

    def __init__(self, api: Api, events: EventRecorder) -> None:
        super().__init__(api)
        self.events = events

    async def reconcile(self) -> None:
        for deployment in self.api.store.snapshot("apps", "deployments"):
            if not deployment["metadata"].get("deletionTimestamp"):
                self._sync(deployment)

    def _sync(self, deployment: dict[str, Any]) -> None:
        rs_rt = self.rt("apps", "replicasets")
        namespace = deployment["metadata"]["namespace"]
        uid = deployment["metadata"]["uid"]
        desired = int(deployment["spec"].get("replicas", 1))
        template = deployment["spec"]["template"]
        pod_hash = template_hash(template)
        owned = [rs for rs in self.api.store.snapshot("apps", "replicasets", namespace) if owned_by(rs, uid)]
        new = next((rs for rs in owned if rs["metadata"].get("labels", {}).get(HASH_LABEL) == pod_hash), None)
        old = [rs for rs in owned if rs is not new]
        revision = max([int(rs["metadata"].get("annotations", {}).get(REVISION, "0")) for rs in owned] + [0])
        if new is None:
            revision += 1
            new = self._create_rs(rs_rt, deployment, pod_hash, revision, 0 if old else desired)
        else:
            revision = int(new["metadata"].get("annotations", {}).get(REVISION, str(revision)))
        recreate = (deployment["spec"].get("strategy") or {}).get("type") == "Recreate"
        old_replicas = sum(int(rs["spec"].get("replicas", 0)) for rs in old)
        old_running = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in old)
        if recreate:
            for rs in old:
                self._scale(rs_rt, rs, 0, deployment)
            target = desired if old_running == 0 else 0
            self._scale(rs_rt, new, target, deployment)
        elif not old:
            self._scale(rs_rt, new, desired, deployment)
        else:
            surge, max_unavailable = rolling_bounds(deployment)
            new_replicas = int(new["spec"].get("replicas", 0))
            room = desired + surge - (old_replicas + new_replicas)
            if room > 0 and new_replicas < desired:
                new_replicas = min(desired, new_replicas + room)
                self._scale(rs_rt, new, new_replicas, deployment)
            available = sum(int((rs.get("status") or {}).get("availableReplicas", 0)) for rs in [new, *old])
            old_unavailable = sum(
                int(rs["spec"].get("replicas", 0)) - int((rs.get("status") or {}).get("availableReplicas", 0))
                for rs in old
            )
            removable = max(0, available - (desired - max_unavailable)) + max(0, old_unavailable)
            for rs in sorted(old, key=lambda r: r["metadata"].get("creationTimestamp", "")):
                if removable <= 0:
                    break
                current = int(rs["spec"].get("replicas", 0))
                cut = min(current, removable)
                if cut:
                    self._scale(rs_rt, rs, current - cut, deployment)
                    removable -= cut
        self._status(deployment, new, old, revision)

    def _create_rs(
        self, rt: Any, deployment: dict[str, Any], pod_hash: str, revision: int, replicas: int
    ) -> dict[str, Any]:
        template = copy.deepcopy(deployment["spec"]["template"])
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pod_hash
        selector = copy.deepcopy(deployment["spec"]["selector"])
        selector.setdefault("matchLabels", {})[HASH_LABEL] = pod_hash
        name = f"{deployment['metadata']['name']}-{pod_hash}"
        rs = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": deployment["metadata"]["namespace"],
                "labels": {**(template["metadata"].get("labels") or {})},
                "annotations": {
                    REVISION: str(revision),
                    "deployment.kubernetes.io/desired-replicas": str(deployment["spec"].get("replicas", 1)),
                },
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": template},
        }
        deployment_rt = self.rt("apps", "deployments")
        current = self.api.find(
            deployment_rt, deployment["metadata"]["namespace"], deployment["metadata"]["name"]
        )
        if current is not None:
            annotations = current["metadata"].setdefault("annotations", {})
            if annotations.get(REVISION) != str(revision):
                annotations[REVISION] = str(revision)
                self.api.write(deployment_rt, current, self.name)
        created = self.api.create(
            rt, deployment["metadata"]["namespace"], rs, manager="kube-controller-manager"
        )
        if replicas:
            message = f"Scaled up replica set {name} from 0 to {replicas}"
            self.events.record(deployment, "ScalingReplicaSet", message, component=self.name)
        return created

    def _scale(self, rt: Any, rs: dict[str, Any], replicas: int, deployment: dict[str, Any]) -> None:
        before = int(rs["spec"].get("replicas", 0))
        if before == replicas:
            return
        current = self.api.find(rt, rs["metadata"]["namespace"], rs["metadata"]["name"])
        if current is not None:
            current["spec"]["replicas"] = replicas
            self.api.write(rt, current, self.name)
            direction = "up" if replicas > before else "down"
            message = f"Scaled {direction} replica set {rs['metadata']['name']} from {before} to {replicas}"
            self.events.record(deployment, "ScalingReplicaSet", message, component=self.name)

    def _status(
        self, deployment: dict[str, Any], new: dict[str, Any], old: list[dict[str, Any]], revision: int
    ) -> None:
        everything = [new, *old]

        def total(field: str) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0)) for rs in everything)

        desired = int(deployment["spec"].get("replicas", 1))
        _, max_unavailable = rolling_bounds(deployment)
        available = total("availableReplicas")
        updated = int((new.get("status") or {}).get("replicas", 0))
        complete = updated == desired and total("replicas") == desired and available == desired
        now = now_iso()
        previous = {c["type"]: c for c in (deployment.get("status") or {}).get("conditions") or []}

        def cond(kind: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
            before = previous.get(kind) or {}
            status = "True" if ok else "False"
            changed = before.get("status") != status
            return {
                "type": kind,
                "status": status,
                "lastUpdateTime": now
                if changed or before.get("reason") != reason
                else before.get("lastUpdateTime"),
                "lastTransitionTime": now if changed else before.get("lastTransitionTime"),
                "reason": reason,
                "message": message,
            }

        conditions = [
            cond(
                "Available",
                available >= desired - max_unavailable,
                "MinimumReplicasAvailable"
                if available >= desired - max_unavailable
                else "MinimumReplicasUnavailable",
                "Deployment has minimum availability."
                if available >= desired - max_unavailable
                else "Deployment does not have minimum availability.",
            ),
            cond(
                "Progressing",
                True,
                "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                f'ReplicaSet "{new["metadata"]["name"]}" has successfully progressed.'
                if complete
                else f'ReplicaSet "{new["metadata"]["name"]}" is progressing.',
            ),
        ]
        status: dict[str, Any] = {
            "observedGeneration": deployment["metadata"].get("generation", 1),
            "replicas": total("replicas"),
            "updatedReplicas": updated,
            "readyReplicas": total("readyReplicas"),
            "availableReplicas": available,
            "conditions": conditions,
        }
        if desired - available > 0:
            status["unavailableReplicas"] = desired - available
        for key in ("readyReplicas", "availableReplicas", "updatedReplicas", "replicas"):
            if not status[key]:
                status.pop(key)
        self.api.write_status(self.rt("apps", "deployments"), deployment, status, self.name)
