"""Per-purpose API keys. A key's id survives rotation; its secrets are stored only as hashes."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from keys.purposes import PURPOSES, Kind


class Status(models.TextChoices):
    ACTIVE = "active", "Active"
    EXPIRED = "expired", "Expired"
    REVOKED = "revoked", "Revoked"
    EXHAUSTED = "exhausted", "Exhausted"
    UNKNOWN = "unknown", "Unknown: Redis unreachable"  # a limited key whose usage cannot be read now


PURPOSE_CHOICES = [(p.name, p.label) for p in PURPOSES.values()]


class ApiKey(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100)
    purpose = models.CharField(max_length=32, choices=PURPOSE_CHOICES)
    purpose_label = models.CharField(max_length=64, blank=True, help_text="Label of a custom purpose.")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    team = models.CharField(max_length=100, blank=True)
    scopes = models.JSONField(default=list)
    allowed_models = models.JSONField(default=list, blank=True, help_text="Empty: every model.")
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)
    max_concurrent = models.PositiveIntegerField(null=True, blank=True)
    requests_per_day = models.PositiveBigIntegerField(null=True, blank=True)
    requests_per_month = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_per_day = models.PositiveBigIntegerField(null=True, blank=True)
    tokens_per_month = models.PositiveBigIntegerField(null=True, blank=True)
    alert_thresholds = models.JSONField(default=list, blank=True)
    allowed_cidrs = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoke_reason = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_key = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["purpose", "name", "created"]
        indexes = [models.Index(fields=["owner", "purpose"])]

    def __str__(self) -> str:
        return self.name

    @property
    def purpose_display(self) -> str:
        return self.purpose_label or self.get_purpose_display()

    def stored_status(self, now: datetime | None = None) -> str:
        """Revoked or expired from the row alone; exhaustion needs the live counters (see selectors)."""
        if self.revoked_at is not None:
            return Status.REVOKED
        if self.expires_at <= (now or timezone.now()):
            return Status.EXPIRED
        return Status.ACTIVE


class ApiKeySecret(models.Model):
    """One secret of a key. Rotation adds one and gives the previous a retirement time (grace)."""

    key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="secrets")
    digest = models.CharField(max_length=64, unique=True)
    display_prefix = models.CharField(max_length=16)
    last4 = models.CharField(max_length=4)
    created = models.DateTimeField(auto_now_add=True)
    retires_at = models.DateTimeField(null=True, blank=True, help_text="Set when rotated away.")

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.display_prefix}…{self.last4}"


class ApiKeyUsage(models.Model):
    """Requests and tokens of one key in one hour (rolled up from Redis off the request path)."""

    key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="usage")
    hour = models.DateTimeField()
    requests = models.PositiveBigIntegerField(default=0)
    tokens = models.PositiveBigIntegerField(default=0)
    denied = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["hour"]
        constraints = [models.UniqueConstraint(fields=["key", "hour"], name="keys_usage_one_row_per_hour")]

    def __str__(self) -> str:
        return f"{self.key_id} {self.hour:%Y-%m-%d %H}:00"


class KeyPolicy(models.Model):
    """Site-wide rules for issuing keys: one row (pk 1), changed by admins; absent means the defaults."""

    viewers_issue_inference_keys = models.BooleanField(
        default=True, help_text="Viewers may issue inference keys for themselves (admins may issue theirs)."
    )
    updated = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return "key policy"
