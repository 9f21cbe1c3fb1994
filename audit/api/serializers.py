from __future__ import annotations

from rest_framework import serializers

from audit.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.CharField(source="actor_label", read_only=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "created",
            "actor",
            "action",
            "target_type",
            "target_id",
            "target_label",
            "source_ip",
            "detail",
        ]
        read_only_fields = fields
