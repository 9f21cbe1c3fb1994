"""One FilterSet for deployments, shared by the API list and the topology page."""

from __future__ import annotations

import django_filters

from controlplane.filters import BooleanFilter, ChoiceFilter, IdFilter
from deployments.models import Deployment, Kind, State


class DeploymentFilterSet(django_filters.FilterSet):
    topology = IdFilter(field_name="topology_id", help_text="Topology id.")
    state = ChoiceFilter(choices=State.choices, label="State")
    kind = ChoiceFilter(choices=Kind.choices, label="Kind")
    active = BooleanFilter(method="filter_active", label="Only running deployments")

    class Meta:
        model = Deployment
        fields = ["topology", "state", "kind", "active"]

    def filter_active(
        self, queryset: django_filters.FilterSet, name: str, value: bool | None
    ) -> django_filters.FilterSet:
        from deployments.models import ACTIVE_STATES

        if value is None:
            return queryset
        return (
            queryset.filter(state__in=ACTIVE_STATES) if value else queryset.exclude(state__in=ACTIVE_STATES)
        )
