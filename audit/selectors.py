from __future__ import annotations

from django.db.models import QuerySet

from audit.models import AuditEvent


def audit_event_list() -> QuerySet[AuditEvent]:
    return AuditEvent.objects.select_related("actor").order_by("-created", "-id")


def audit_action_names() -> list[str]:
    """Every action recorded so far, for the filter's suggestions."""
    return list(AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()[:200])
