from __future__ import annotations

from django.db.models import QuerySet
from rest_framework import viewsets

from audit.api.serializers import AuditEventSerializer
from audit.filtersets import AuditEventFilterSet
from audit.models import AuditEvent
from audit.selectors import audit_event_list
from keys.scopes import Scope


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet[AuditEvent]):
    """The audit log: who did what, when, and from where. Newest first; read-only."""

    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilterSet
    required_scopes = {"read": Scope.AUDIT_READ}

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_event_list()
