from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from telemetry.models import AlertMetric, TelemetryAlert


class TelemetryAlertFilterSet(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(
        choices=[("open", "open"), ("resolved", "resolved")], method="filter_state", label="State"
    )
    metric = django_filters.ChoiceFilter(choices=AlertMetric.choices)

    class Meta:
        model = TelemetryAlert
        fields = ["state", "metric"]

    def filter_state(
        self, queryset: QuerySet[TelemetryAlert], name: str, value: str
    ) -> QuerySet[TelemetryAlert]:
        return queryset.filter(resolved__isnull=(value == "open"))
