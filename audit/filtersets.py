from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from audit.models import AuditEvent


class AuditEventFilterSet(django_filters.FilterSet):
    """Shared by the Activity page and GET /api/v1/audit-events/."""

    action = django_filters.CharFilter(
        method="filter_action", label="Action", help_text="e.g. topology.deploy, or topology for all of them"
    )
    actor = django_filters.CharFilter(method="filter_actor", label="Who", help_text="username or key name")
    target = django_filters.CharFilter(method="filter_target", label="Target", help_text="part of the name")
    target_type = django_filters.CharFilter(field_name="target_type", label="Target type")
    since = django_filters.IsoDateTimeFilter(field_name="created", lookup_expr="gte", label="Since")
    until = django_filters.IsoDateTimeFilter(field_name="created", lookup_expr="lte", label="Until")

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
