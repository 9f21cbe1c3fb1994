from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from audit.models import AuditEvent


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time read in UTC. PostgreSQL refuses UTC offsets beyond ±15:59 (Python allows ±23:59),
    and a time near year 1 or 9999 can leave the calendar once in UTC: both are a 400 naming the filter."""

    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except (OverflowError, ValueError):
            raise forms.ValidationError(
                "is outside the calendar once in UTC; give a time such as 2026-12-01T00:00:00Z",
                code="invalid",
            ) from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class AuditEventFilterSet(django_filters.FilterSet):
    """Shared by the Activity page and GET /api/v1/audit-events/."""

    action = django_filters.CharFilter(
        method="filter_action", label="Action", help_text="e.g. topology.deploy, or topology for all of them"
    )
    actor = django_filters.CharFilter(method="filter_actor", label="Who", help_text="username or key name")
    target = django_filters.CharFilter(method="filter_target", label="Target", help_text="part of the name")
    target_type = django_filters.CharFilter(field_name="target_type", label="Target type")
    since = UtcIsoDateTimeFilter(field_name="created", lookup_expr="gte", label="Since")
    until = UtcIsoDateTimeFilter(field_name="created", lookup_expr="lte", label="Until")

    class Meta:
        model = AuditEvent
        fields = ["action", "actor", "target", "target_type", "since", "until"]

    def filter_action(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        value = value.strip().rstrip(".")
        return queryset.filter(Q(action=value) | Q(action__startswith=f"{value}."))

    def filter_actor(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        return queryset.filter(actor_label__iexact=value.strip())

    def filter_target(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
        value = value.strip()
        return queryset.filter(Q(target_label__icontains=value) | Q(target_id=value))
