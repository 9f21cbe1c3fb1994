from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from accounts.models import User
from accounts.roles import Role
from controlplane.filters import BooleanFilter, ChoiceFilter


class UserFilterSet(django_filters.FilterSet):
    """Shared by the Users page and GET /api/v1/users/."""

    q = django_filters.CharFilter(method="filter_q", label="Search")
    role = ChoiceFilter(choices=Role.choices)
    is_active = BooleanFilter(label="Active")

    class Meta:
        model = User
        fields = ["q", "role", "is_active"]

    def filter_q(self, queryset: QuerySet[User], name: str, value: str) -> QuerySet[User]:
        return queryset.filter(Q(username__icontains=value) | Q(email__icontains=value))
