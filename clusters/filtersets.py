"""The one FilterSet for clusters, shared by the clusters page and ``GET /api/v1/clusters/``."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from clusters.models import AuthMethod, Cluster, HealthState
from controlplane.filters import BooleanFilter, ChoiceFilter


class ClusterFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search name, description or server")
    health_state = ChoiceFilter(choices=HealthState.choices, label="Health")
    auth_method = ChoiceFilter(choices=AuthMethod.choices, label="Connected by")
    kthena_installed = BooleanFilter(label="Kthena installed")

    class Meta:
        model = Cluster
        fields = ["q", "health_state", "auth_method", "kthena_installed"]

    def search(self, queryset: QuerySet[Cluster], name: str, value: str) -> QuerySet[Cluster]:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(name__icontains=value) | Q(description__icontains=value) | Q(server__icontains=value)
        )
