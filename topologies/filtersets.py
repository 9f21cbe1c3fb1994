"""The one FilterSet for topologies, shared by the topology list page and ``GET /api/v1/topologies/``."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from clusters.models import Cluster
from controlplane.filters import ChoiceFilter
from topologies.models import Backend, DriftState, Engine, KvConnector, Topology


class TopologyFilterSet(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Search name, model or namespace")
    cluster = django_filters.ModelChoiceFilter(
        queryset=Cluster.objects.order_by("name"),
        label="Cluster",
        error_messages={"invalid_choice": "no cluster has id %(value)s; use an id from /api/v1/clusters/"},
    )
    engine = ChoiceFilter(choices=Engine.choices, label="Engine")
    backend = ChoiceFilter(choices=Backend.choices, label="Backend")
    kv_connector = ChoiceFilter(choices=KvConnector.choices, label="KV connector")
    drift_state = ChoiceFilter(choices=DriftState.choices, label="Drift")
    namespace = django_filters.CharFilter(label="Namespace")

    class Meta:
        model = Topology
        fields = ["q", "cluster", "engine", "backend", "kv_connector", "drift_state", "namespace"]

    def search(self, queryset: QuerySet[Topology], name: str, value: str) -> QuerySet[Topology]:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(name__icontains=value) | Q(model_name__icontains=value) | Q(namespace__icontains=value)
        )
