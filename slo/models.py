"""Service-level objectives of a topology, their error budgets, burn-rate alerts and notifications.

- ``Slo``: one objective of a topology ("99 % of requests have TTFT ≤ 800 ms over 28 days"), with its
  silence and the status of its last evaluation (budget left, burn rates) for the pages.
- ``SliMinute``: the good and total events of one SLO in one minute, counted from each telemetry
  interval (kept for the compliance window).
- ``SloAlert``: a burn-rate alert of one severity (page or ticket) from firing to resolved, with its
  acknowledgement; ``AlertEvent`` records every transition (fired, resolved, acknowledged, silenced...).
- ``NotificationTarget``: a webhook (generic JSON, Slack or Alertmanager) for one topology or all of
  them; its URL is encrypted at rest. ``Delivery`` is one notification to one target with its
  ``DeliveryAttempt`` rows (status code or error, time).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from controlplane.crypto import EncryptedTextField


class Sli(models.TextChoices):
    TTFT = "ttft", "TTFT"
    TBT = "tbt", "TBT"
    SUCCESS = "success", "Success"


class Slo(models.Model):
    topology = models.ForeignKey("topologies.Topology", on_delete=models.CASCADE, related_name="slos")
    sli = models.CharField(max_length=16, choices=Sli.choices)
    objective = models.FloatField(help_text="Share of good events, 0..1 exclusive (0.99 for 99 %).")
    threshold_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="Latency SLIs: an event is good at or below this (ms)."
    )
    window_days = models.PositiveSmallIntegerField(default=28)
    enabled = models.BooleanField(default=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    silence_reason = models.CharField(max_length=300, blank=True)
    silenced_by = models.CharField(max_length=150, blank=True)
    status = models.JSONField(default=dict, blank=True, help_text="The last evaluation (slo.evaluate).")
    evaluated = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["topology_id", "sli"]
        constraints = [models.UniqueConstraint(fields=["topology", "sli"], name="slo_one_per_sli")]

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        share = f"{self.objective * 100:g} %"
        if self.sli == Sli.SUCCESS:
            what = "of requests answered without a server error"
        elif self.sli == Sli.TTFT:
            what = f"of requests have TTFT ≤ {self.threshold_ms} ms"
        else:
            what = f"of tokens follow the previous within {self.threshold_ms} ms (TBT)"
        return f"{share} {what} over {self.window_days} days"


class SliMinute(models.Model):
    pk = models.CompositePrimaryKey("slo_id", "minute")
    slo = models.ForeignKey(Slo, on_delete=models.CASCADE, related_name="+")
    minute = models.DateTimeField()
    good = models.FloatField()
    total = models.FloatField()

    def __str__(self) -> str:
        return f"{self.slo_id}@{self.minute.isoformat()} {self.good}/{self.total}"


class Severity(models.TextChoices):
    PAGE = "page", "Page"
    TICKET = "ticket", "Ticket"


class AlertState(models.TextChoices):
    FIRING = "firing", "Firing"
    RESOLVED = "resolved", "Resolved"


class SloAlert(models.Model):
    slo = models.ForeignKey(Slo, on_delete=models.CASCADE, related_name="alerts")
    severity = models.CharField(max_length=8, choices=Severity.choices)
    state = models.CharField(max_length=16, choices=AlertState.choices, default=AlertState.FIRING)
    rule = models.CharField(max_length=40, help_text="The rule that fired it, e.g. page 1 h/5 m.")
    burn_threshold = models.FloatField()
    long_burn = models.FloatField(help_text="Burn rate over the rule's long window when it fired.")
    short_burn = models.FloatField(help_text="Burn rate over the rule's short window when it fired.")
    peak_burn = models.FloatField(help_text="The highest long-window burn rate seen while firing.")
    started = models.DateTimeField(db_index=True)
    ended = models.DateTimeField(null=True, blank=True)
    acknowledged = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-started", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["slo", "severity"],
                condition=models.Q(state="firing"),
                name="slo_alert_one_firing_per_severity",
            )
        ]

    def __str__(self) -> str:
        return f"{self.severity} alert on {self.slo}"


class AlertEventKind(models.TextChoices):
    FIRED = "fired", "Fired"
    RESOLVED = "resolved", "Resolved"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    SILENCED = "silenced", "Silenced"
    SUPPRESSED = "suppressed", "Notification held by a silence"


class AlertEvent(models.Model):
    alert = models.ForeignKey(SloAlert, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=AlertEventKind.choices)
    at = models.DateTimeField()
    actor = models.CharField(max_length=150, blank=True, help_text="Who; empty for the evaluation.")
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.alert_id} {self.kind}"


class TargetFormat(models.TextChoices):
    JSON = "json", "Generic JSON"
    SLACK = "slack", "Slack incoming webhook"
    ALERTMANAGER = "alertmanager", "Alertmanager webhook"


class NotificationTarget(models.Model):
    name = models.CharField(max_length=100, unique=True)
    topology = models.ForeignKey(
        "topologies.Topology",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="notification_targets",
        help_text="Empty: every topology's alerts.",
    )
    format = models.CharField(max_length=16, choices=TargetFormat.choices, default=TargetFormat.JSON)
    url = EncryptedTextField(help_text="The webhook URL (may hold a token; encrypted at rest).")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class DeliveryEvent(models.TextChoices):
    FIRING = "firing", "Firing"
    RESOLVED = "resolved", "Resolved"
    TEST = "test", "Test"


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    SENDING = "sending", "Sending"
    RETRYING = "retrying", "Retrying"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"


class Delivery(models.Model):
    target = models.ForeignKey(NotificationTarget, on_delete=models.CASCADE, related_name="deliveries")
    alert = models.ForeignKey(
        SloAlert, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=16, choices=DeliveryEvent.choices)
    state = models.CharField(max_length=16, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    payload = models.JSONField(
        help_text="The body sent, fixed when the delivery was made (retries send it again)."
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt = models.DateTimeField(db_index=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.target_id}: {self.state}"


class DeliveryAttempt(models.Model):
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveSmallIntegerField()
    at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.FloatField()

    class Meta:
        ordering = ["delivery_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="slo_delivery_attempt_number")
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id}#{self.number} {self.status_code or self.error}"
