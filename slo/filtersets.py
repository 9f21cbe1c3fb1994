from __future__ import annotations

import django_filters

from slo.models import AlertState, Delivery, DeliveryState, SloAlert


class SloAlertFilterSet(django_filters.FilterSet):
    topology = django_filters.NumberFilter(field_name="slo__topology_id")
    state = django_filters.ChoiceFilter(choices=AlertState.choices)

    class Meta:
        model = SloAlert
        fields = ["topology", "state", "severity"]


class DeliveryFilterSet(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=DeliveryState.choices)

    class Meta:
        model = Delivery
        fields = ["target", "alert", "state", "event"]
