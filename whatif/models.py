"""A what-if run: a replay of a topology's recorded traffic for several splits, run as a background job."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.db import models
from django.db.models import Q


class WhatIfState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_STATES = (WhatIfState.QUEUED, WhatIfState.RUNNING)


class WhatIfRun(models.Model):
    topology = models.ForeignKey("topologies.Topology", on_delete=models.CASCADE, related_name="whatif_runs")
    window_start = models.FloatField(help_text="Unix seconds")
    window_end = models.FloatField(help_text="Unix seconds")
    splits = models.JSONField(default=list, help_text="[[prefill, decode], ...] considered")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_by_label = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=WhatIfState.choices, default=WhatIfState.QUEUED)
    progress = models.FloatField(default=0.0)
    step = models.CharField(max_length=300, blank=True)
    cancel_requested = models.BooleanField(default=False)
    trace = models.JSONField(
        null=True,
        blank=True,
        help_text="An imported trace to replay instead of the window's traffic: "
        '{"file_format", "name", "total", "requests": [[arrival_ms, prompt_tokens, output_tokens, '
        "prefix_group], ...]} (its latest requests)",
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            # At most one queued or running run per topology (services.TOPOLOGY_LIMIT): the database decides.
            models.UniqueConstraint(
                fields=["topology"],
                condition=Q(state__in=["queued", "running"]),
                name="whatif_one_active_run_per_topology",
            )
        ]

    def __str__(self) -> str:
        return f"what-if #{self.pk}"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def window_seconds(self) -> int:
        return round(self.window_end - self.window_start)

    @property
    def window_end_at(self) -> datetime:
        return datetime.fromtimestamp(self.window_end, tz=UTC)
