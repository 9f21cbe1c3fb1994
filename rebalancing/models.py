"""Rebalancing: the planner's settings per topology, its decisions, and ratio changes / role switches.

A ``Rebalance`` is an operator's (or the planner's) request to reach a split; it is carried out as a
sequence of one-at-a-time moves, each one a deployments scale job (``deployments.Deployment`` of
kind ``scale``), so the job, step and claim machinery (and the topology page's live timeline) is the
deployments app's.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class PlannerMode(models.TextChoices):
    OFF = "off", "Off"
    ADVISORY = "advisory", "Advisory (record what it would do)"
    AUTO = "auto", "Auto (act)"


# PlannerConfig.state's key for the pods the planner staged: {pod: the role it served}.
STAGED_STATE_KEY = "staged_pods"


class PlannerConfig(models.Model):
    topology = models.OneToOneField(
        "topologies.Topology", on_delete=models.CASCADE, related_name="planner_config"
    )
    mode = models.CharField(max_length=16, choices=PlannerMode.choices, default=PlannerMode.OFF)
    params = models.JSONField(default=dict, blank=True, help_text="rebalancing.policy.Params overrides.")
    min_ratio = models.FloatField(
        null=True, blank=True, help_text="ratioConstraint.minRatio (prefill/decode)."
    )
    max_ratio = models.FloatField(
        null=True, blank=True, help_text="ratioConstraint.maxRatio (prefill/decode)."
    )
    state = models.JSONField(default=dict, blank=True, help_text="The planner's streaks and last move.")
    last_tick = models.DateTimeField(null=True, blank=True)
    ticking_until = models.DateTimeField(
        null=True, blank=True, help_text="A tick is under way until then (its lease; a crashed tick's ends)."
    )
    # One owner of the replica counts (rebalancing.owners): auto mode pauses when another controller or
    # a person changes them, and says who and what to do; setting the planner to auto again resumes it.
    paused_reason = models.TextField(
        blank=True, help_text="Why auto mode is paused (another owner of the replicas); empty when not."
    )
    paused_at = models.DateTimeField(null=True, blank=True)
    other_owners = models.JSONField(
        default=list, blank=True, help_text="Other owners of the replicas the last check found."
    )
    replicas_seen = models.JSONField(
        default=dict,
        blank=True,
        help_text="The replica fields at the last check: {workload: {field: value}}.",
    )
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"planner of topology {self.topology_id}: {self.mode}"


class Outcome(models.TextChoices):
    HELD = "held", "Held (nothing to do)"
    ADVISED = "advised", "Advised (advisory mode: not acted on)"
    STARTED = "started", "Move started"
    SUCCEEDED = "succeeded", "Move succeeded"
    FAILED = "failed", "Move failed"
    REFUSED = "refused", "Refused"
    PAUSED = "paused", "Auto paused (another owner of the replicas)"


class Decision(models.Model):
    topology = models.ForeignKey("topologies.Topology", on_delete=models.CASCADE, related_name="decisions")
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    mode = models.CharField(max_length=16, choices=PlannerMode.choices)
    rule = models.CharField(max_length=32)
    action = models.CharField(max_length=32)
    from_prefill = models.PositiveIntegerField()
    from_decode = models.PositiveIntegerField()
    to_prefill = models.PositiveIntegerField()
    to_decode = models.PositiveIntegerField()
    explanation = models.TextField()
    inputs = models.JSONField(default=dict, help_text="The observation the policy saw.")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    outcome_detail = models.TextField(blank=True)
    rebalance = models.ForeignKey(
        "rebalancing.Rebalance", null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["topology", "-created"])]

    def __str__(self) -> str:
        return f"{self.created:%H:%M:%S} {self.action}: {self.explanation}"


class RebalanceKind(models.TextChoices):
    RATIO = "ratio", "Set the ratio"
    SWITCH_RESTART = "switch_restart", "Role switch (restart-based)"
    SWITCH_IN_PLACE = "switch_in_place", "Role switch (in place)"
    PLANNER = "planner", "Planner move"


class RebalanceState(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class Rebalance(models.Model):
    topology = models.ForeignKey("topologies.Topology", on_delete=models.CASCADE, related_name="rebalances")
    kind = models.CharField(max_length=16, choices=RebalanceKind.choices)
    state = models.CharField(max_length=16, choices=RebalanceState.choices, default=RebalanceState.RUNNING)
    from_prefill = models.PositiveIntegerField()
    from_decode = models.PositiveIntegerField()
    target_prefill = models.PositiveIntegerField()
    target_decode = models.PositiveIntegerField()
    moves = models.JSONField(default=list, help_text="[{role, replicas}] in execution order.")
    next_move = models.PositiveIntegerField(default=0, help_text="Index of the move to start next.")
    deployment = models.ForeignKey(
        "deployments.Deployment", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    deployments = models.JSONField(default=list, help_text="Ids of the scale jobs run so far.")
    params = models.JSONField(default=dict, blank=True, help_text="e.g. {instance, target_role}.")
    log = models.JSONField(default=list, help_text="[{ts, message}] steps as they happen.")
    requested_by_label = models.CharField(max_length=150, blank=True)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(
        null=True, blank=True, help_text="In-place switches: set by the worker that claimed it, at each step."
    )

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["topology"], condition=Q(state="running"), name="one_running_rebalance_per_topology"
            )
        ]

    def __str__(self) -> str:
        return f"rebalance #{self.pk} to {self.target_prefill}P/{self.target_decode}D ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state == RebalanceState.RUNNING


class RoleOverride(models.Model):
    """A running pod that serves another role than its template's, after an in-place switch.

    The orchestrator (Kthena's ModelServing) still counts the pod in its template role; Tandem routes
    it by its serving-role label. The effective split is the spec's plus these overrides; an override
    ends when the pod is switched back, replaced (a new pod starts with its template's role) or its engine
    restarted (it starts in its template's role too: ``rebalancing.services.overrides``)."""

    topology = models.ForeignKey(
        "topologies.Topology", on_delete=models.CASCADE, related_name="role_overrides"
    )
    pod = models.CharField(max_length=253)
    template_role = models.CharField(max_length=16)
    serving_role = models.CharField(max_length=16)
    rebalance = models.ForeignKey(
        "rebalancing.Rebalance", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The pod's container restarts when it was switched: more later means its engine restarted in its
    # template's role (rebalancing.services.overrides).
    restarts = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pod"]
        constraints = [models.UniqueConstraint(fields=["topology", "pod"], name="one_override_per_pod")]

    def __str__(self) -> str:
        return f"{self.pod}: {self.template_role} serving {self.serving_role}"
