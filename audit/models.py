from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """Who did what, when, and from where. Written by services, listed on the Activity page."""

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_label = models.CharField(max_length=150, blank=True, help_text="Username, key name or 'system'.")
    action = models.CharField(max_length=64, db_index=True, help_text="e.g. topology.deploy")
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=200, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id", "-created"])]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.target_label}"
