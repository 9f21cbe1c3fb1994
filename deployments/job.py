"""Who owns a deployment job: claimed with a conditional UPDATE, kept alive by heartbeats.

A worker whose heartbeat goes stale is presumed dead; another worker may then claim the job and resume it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

import kube
from audit.services import audit_record
from deployments.models import ACTIVE_STATES, Deployment, DeployPolicy, can_move
from deployments.services import deployment_step_add


class LostClaim(Exception):
    """Another worker owns the job now (ours was presumed dead); stop without touching it."""


class Cancelled(Exception):
    """An operator cancelled the job."""


def setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


@dataclass
class Job:
    deployment_id: int
    worker: str
    last_progress: tuple[int, int] = field(default=(-1, -1))

    def load(self) -> Deployment:
        return Deployment.objects.select_related(
            "topology", "topology__cluster", "revision", "previous_revision", "rolled_back_to"
        ).get(pk=self.deployment_id)

    def _mine(self) -> Any:
        return Deployment.objects.filter(
            pk=self.deployment_id, claimed_by=self.worker, state__in=ACTIVE_STATES
        )

    def beat(self, *, check_cancel: bool = True, **fields: Any) -> Deployment:
        """Refresh the heartbeat (and progress fields); raise if the claim was lost or a cancel asked."""
        if not self._mine().update(heartbeat=timezone.now(), **fields):
            raise LostClaim(self.deployment_id)
        deployment = self.load()
        if check_cancel and deployment.cancel_requested:
            raise Cancelled()
        progress = (deployment.pods_ready, deployment.pods_total)
        if progress != self.last_progress and "pods_total" in fields:
            self.last_progress = progress
            deployment_step_add(
                deployment=deployment,
                message=f"{progress[0]}/{progress[1]} pods ready",
                detail={"progress": True},
            )
        return deployment

    def move(
        self, state: str, message: str, detail: dict[str, Any] | None = None, **fields: Any
    ) -> Deployment:
        current = self.load()
        if not can_move(current.state, state):
            raise RuntimeError(f"illegal deployment move {current.state} → {state}")
        now = timezone.now()
        extra: dict[str, Any] = {"finished": now} if state not in ACTIVE_STATES else {}
        # The state and its step in one commit: a reader never sees a finished job without its last step.
        with transaction.atomic():
            if not self._mine().update(state=state, heartbeat=now, **extra, **fields):
                raise LostClaim(self.deployment_id)
            deployment = self.load()
            deployment_step_add(deployment=deployment, message=message, detail=detail)
        if state not in ACTIVE_STATES and deployment.topology is not None:
            audit_record(
                action=f"deployment.{state}",
                target=deployment.topology,
                detail={
                    "deployment": deployment.pk,
                    "kind": deployment.kind,
                    "revision": deployment.revision_number,
                    "message": message[:500],
                },
            )
            rollout_broadcast(deployment.topology_id)
        return deployment


def rollout_broadcast(topology_id: int | None) -> None:
    """Tell the Overview the topology's desired/running revision and whether its last attempt failed."""
    from controlplane.broadcast import broadcast_on_commit, overview_group
    from deployments.rollout import topology_rollout
    from topologies.models import Topology

    if topology_id is None:
        return
    topology = (
        Topology.objects.select_related("current_revision", "deployed_revision")
        .filter(pk=topology_id)
        .first()
    )
    if topology is None:
        return
    broadcast_on_commit(
        overview_group(), {"kind": "rollout", "topology_id": topology.pk, **topology_rollout(topology)}
    )


def claim(deployment_id: int, worker: str) -> str:
    """Take the job: "claimed", "busy" (a live worker holds it), "done" (final) or "missing"."""
    now = timezone.now()
    stale = now - timedelta(seconds=float(setting("DEPLOY_HEARTBEAT_STALE_SECONDS", 60)))
    taken = (
        Deployment.objects.filter(pk=deployment_id, state__in=ACTIVE_STATES)
        .filter(Q(claimed_by="") | Q(claimed_by=worker) | Q(heartbeat__isnull=True) | Q(heartbeat__lt=stale))
        .update(
            claimed_by=worker, heartbeat=now, attempts=F("attempts") + 1, started=Coalesce("started", now)
        )
    )
    if taken:
        return "claimed"
    row = Deployment.objects.filter(pk=deployment_id).values_list("state", flat=True).first()
    if row is None:
        return "missing"
    return "busy" if row in ACTIVE_STATES else "done"


def deploy_options(deployment: Deployment) -> tuple[float, bool]:
    """(ready timeout in seconds, automatic rollback) from the topology's policy, else the environment."""
    found = DeployPolicy.objects.filter(topology=deployment.topology).first() if deployment.topology else None
    policy = found or DeployPolicy()
    return float(policy.effective_ready_timeout_seconds), policy.effective_auto_rollback


def keep_failed_first_deploy(deployment: Deployment) -> bool:
    """Whether the topology's deploy policy keeps a failed first deploy's objects for inspection."""
    found = DeployPolicy.objects.filter(topology=deployment.topology).first() if deployment.topology else None
    return bool(found and found.keep_failed_first_deploy)


def connection(deployment: Deployment) -> kube.ClusterConnection:
    from clusters.selectors import cluster_connection

    assert deployment.topology is not None
    return cluster_connection(deployment.topology.cluster)
