"""A deployment is one visible job against a topology: deploy, rollback, scale, re-apply or delete."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Kind(models.TextChoices):
    DEPLOY = "deploy", "Deploy"
    ROLLBACK = "rollback", "Roll back"
    SCALE = "scale", "Scale"
    REAPPLY = "reapply", "Re-apply"
    DELETE = "delete", "Delete"


class State(models.TextChoices):
    QUEUED = "queued", "Queued"
    PREFLIGHT = "preflight", "Preflight"
    APPLYING = "applying", "Applying"
    WAITING = "waiting", "Waiting for ready"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    ROLLED_BACK = "rolled_back", "Rolled back"


ACTIVE_STATES = (State.QUEUED, State.PREFLIGHT, State.APPLYING, State.WAITING)
FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.ROLLED_BACK)

# The legal moves of the state machine; the runner refuses any other.
TRANSITIONS: dict[str, set[str]] = {
    State.QUEUED: {State.PREFLIGHT, State.APPLYING, State.FAILED},
    State.PREFLIGHT: {State.APPLYING, State.FAILED},
    State.APPLYING: {State.WAITING, State.SUCCEEDED, State.FAILED, State.ROLLED_BACK},
    State.WAITING: {State.SUCCEEDED, State.FAILED, State.ROLLED_BACK},
    State.FAILED: set(),
    State.SUCCEEDED: set(),
    State.ROLLED_BACK: set(),
}


def can_move(current: str, new: str) -> bool:
    return current == new or new in TRANSITIONS.get(current, set())


class Deployment(models.Model):
    topology = models.ForeignKey(
        "topologies.Topology", null=True, on_delete=models.SET_NULL, related_name="deployments"
    )
    topology_name = models.CharField(max_length=200, help_text="Kept after the topology is deleted.")
    revision = models.ForeignKey(
        "topologies.Revision", null=True, blank=True, on_delete=models.SET_NULL, related_name="deployments"
    )
    revision_number = models.PositiveIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.DEPLOY)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    params = models.JSONField(default=dict, blank=True, help_text="e.g. {role, replicas} for a scale.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    requested_by_label = models.CharField(max_length=150, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    pods_ready = models.PositiveIntegerField(default=0)
    pods_total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    diagnosis = models.JSONField(default=list, blank=True, help_text="[{code, message, fix, pods}]")
    previous_revision = models.ForeignKey(
        "topologies.Revision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    rolled_back_to = models.ForeignKey(
        "topologies.Revision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_by = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="How many workers have claimed it.")
    cancel_requested = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["topology"],
                condition=Q(state__in=["queued", "preflight", "applying", "waiting"]),
                name="one_active_deployment_per_topology",
            )
        ]
        indexes = [models.Index(fields=["topology", "-created"])]

    def __str__(self) -> str:
        # People see no global job number: "demo: deploy of revision 2" (the API keeps the id).
        return f"{self.topology_name}: {self.describe()}" if self.topology_name else self.describe()

    def describe(self) -> str:
        if self.kind == Kind.SCALE and self.params:
            what = f"scale of {self.params.get('role')} to {self.params.get('replicas')}"
            return f"{what}, revision {self.revision_number}" if self.revision_number else what
        if self.kind == Kind.DELETE:
            return f"delete of {self.topology_name}"
        if self.kind == Kind.ROLLBACK and self.revision_number:
            source = (self.params or {}).get("from_revision")
            return (
                f"rollback from revision {source} to revision {self.revision_number}"
                if source
                else (f"rollback to revision {self.revision_number}")
            )
        label = self.get_kind_display().lower()
        return f"{label} of revision {self.revision_number}" if self.revision_number else label

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def duration_text(self) -> str:
        """How long it ran, for people: "42 s", "3 min 5 s"."""
        if self.started is None or self.finished is None:
            return ""
        seconds = max(0, round((self.finished - self.started).total_seconds()))
        if seconds < 60:
            return f"{seconds} s"
        return f"{seconds // 60} min {seconds % 60} s"

    @property
    def progress_percent(self) -> int:
        if self.state in FINAL_STATES:
            return 100
        if not self.pods_total:
            return 0
        return min(100, round(100 * self.pods_ready / self.pods_total))


class DeploymentStep(models.Model):
    """One line of the deployment's timeline."""

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="steps")
    time = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=State.choices)
    message = models.TextField()
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["time", "id"]

    def __str__(self) -> str:
        return f"{self.state}: {self.message}"


class DeployPolicy(models.Model):
    """Per-topology deploy settings; empty fields fall back to the environment's defaults."""

    topology = models.OneToOneField(
        "topologies.Topology", on_delete=models.CASCADE, related_name="deploy_policy"
    )
    ready_timeout_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seconds to wait for every pod to be Ready (default DEPLOY_READY_TIMEOUT_SECONDS).",
    )
    auto_rollback = models.BooleanField(
        null=True, blank=True, help_text="Return to the last good revision when a deploy fails (default on)."
    )
    keep_failed_first_deploy = models.BooleanField(
        default=False,
        help_text="Leave a failed first deploy's objects in the cluster to inspect them (default: remove).",
    )

    def __str__(self) -> str:
        return f"deploy policy of topology {self.topology_id}"

    @property
    def effective_ready_timeout_seconds(self) -> int:
        if self.ready_timeout_seconds:
            return self.ready_timeout_seconds
        default: int = getattr(settings, "DEPLOY_READY_TIMEOUT_SECONDS", 600)
        return default

    @property
    def effective_auto_rollback(self) -> bool:
        if self.auto_rollback is None:
            return bool(getattr(settings, "DEPLOY_AUTO_ROLLBACK", True))
        return self.auto_rollback
