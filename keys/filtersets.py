from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet
from django.utils import timezone

from controlplane.filters import ChoiceFilter
from keys.models import PURPOSE_CHOICES, ApiKey, Status
from keys.purposes import Kind

STORED_STATUS = [(s.value, s.label) for s in (Status.ACTIVE, Status.EXPIRED, Status.REVOKED)]


class ApiKeyFilterSet(django_filters.FilterSet):
    """Shared by the Keys page and GET /api/v1/keys/."""

    q = django_filters.CharFilter(method="filter_q", label="Search")
    purpose = ChoiceFilter(choices=PURPOSE_CHOICES)
    kind = ChoiceFilter(choices=Kind.choices)
    status = ChoiceFilter(choices=STORED_STATUS, method="filter_status")
    owner = django_filters.CharFilter(field_name="owner__username")

    class Meta:
        model = ApiKey
        fields = ["q", "purpose", "kind", "status", "owner"]

    def filter_q(self, queryset: QuerySet[ApiKey], name: str, value: str) -> QuerySet[ApiKey]:
        return queryset.filter(
            Q(name__icontains=value) | Q(team__icontains=value) | Q(purpose_label__icontains=value)
        )

    def filter_status(self, queryset: QuerySet[ApiKey], name: str, value: str) -> QuerySet[ApiKey]:
        now = timezone.now()
        if value == Status.REVOKED:
            return queryset.filter(revoked_at__isnull=False)
        if value == Status.EXPIRED:
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=now)
        return queryset.filter(revoked_at__isnull=True, expires_at__gt=now)
