from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.api.fields import AsciiIntegerField
from slo.models import (
    AlertEvent,
    Delivery,
    DeliveryAttempt,
    NotificationTarget,
    Sli,
    Slo,
    SloAlert,
    TargetFormat,
)
from slo.payloads import mask_url
from slo.selectors import slo_view
from topologies.models import Topology


class BurnRuleSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="severity, long/short window, e.g. 'page 1 h/5 m'")
    severity = serializers.ChoiceField(choices=["page", "ticket"])
    threshold = serializers.FloatField(help_text="The burn rate both windows must reach.")
    long = serializers.FloatField(
        allow_null=True, help_text="Burn rate over the long window; null: no events."
    )
    short = serializers.FloatField(
        allow_null=True, help_text="Burn rate over the short window; null: no events."
    )
    holds = serializers.BooleanField()


class SloDefinitionSerializer(serializers.ModelSerializer[Slo]):
    topology: serializers.PrimaryKeyRelatedField[Topology] = serializers.PrimaryKeyRelatedField(
        read_only=True
    )
    objective_percent = serializers.SerializerMethodField()
    text = serializers.CharField(source="describe", read_only=True)
    budget_remaining = serializers.SerializerMethodField(
        help_text="Share of the window's error budget left (1 untouched, 0 spent, below 0 overspent); "
        "null: no events yet."
    )
    budget_colour = serializers.SerializerMethodField()
    events_good = serializers.SerializerMethodField()
    events_total = serializers.SerializerMethodField()
    rules = serializers.SerializerMethodField()
    silenced = serializers.SerializerMethodField()

    class Meta:
        model = Slo
        fields = [
            "id", "topology", "sli", "objective_percent", "threshold_ms", "window_days", "enabled", "text",
            "budget_remaining", "budget_colour", "events_good", "events_total", "rules", "evaluated",
            "silenced", "silenced_until", "silence_reason", "silenced_by",
        ]  # fmt: skip

    def get_objective_percent(self, obj: Slo) -> float:
        return round(obj.objective * 100, 6)

    def get_budget_remaining(self, obj: Slo) -> float | None:
        value = (obj.status or {}).get("budget_remaining")
        return float(value) if value is not None else None

    @extend_schema_field(serializers.ChoiceField(choices=["ok", "warn", "bad", "unknown"]))
    def get_budget_colour(self, obj: Slo) -> str:
        return str((obj.status or {}).get("colour", "unknown"))

    def get_events_good(self, obj: Slo) -> float:
        return float((obj.status or {}).get("good", 0.0))

    def get_events_total(self, obj: Slo) -> float:
        return float((obj.status or {}).get("total", 0.0))

    @extend_schema_field(BurnRuleSerializer(many=True))
    def get_rules(self, obj: Slo) -> list[dict[str, Any]]:
        return list(slo_view(obj)["rules"])

    def get_silenced(self, obj: Slo) -> bool:
        return bool(slo_view(obj)["silenced"])


class SloDefinitionCreateSerializer(serializers.Serializer[Any]):
    sli = serializers.ChoiceField(choices=Sli.choices)
    objective_percent = serializers.FloatField(min_value=50, max_value=99.999, help_text="e.g. 99.5")
    threshold_ms = AsciiIntegerField(
        required=False, allow_null=True, min_value=1, max_value=600000, help_text="TTFT and TBT only."
    )
    window_days = AsciiIntegerField(required=False, min_value=1, max_value=90, default=28)


class SloDefinitionUpdateSerializer(serializers.Serializer[Any]):
    objective_percent = serializers.FloatField(required=False, min_value=50, max_value=99.999)
    threshold_ms = AsciiIntegerField(required=False, allow_null=True, min_value=1, max_value=600000)
    window_days = AsciiIntegerField(required=False, min_value=1, max_value=90)
    enabled = serializers.BooleanField(required=False)


class SloSilenceSerializer(serializers.Serializer[Any]):
    until = serializers.DateTimeField(help_text="When notifications start again (at most 30 days ahead).")
    reason = serializers.CharField(max_length=300, help_text="Why, in words.")


class AlertEventSerializer(serializers.ModelSerializer[AlertEvent]):
    class Meta:
        model = AlertEvent
        fields = ["kind", "at", "actor", "detail"]


class SloAlertSerializer(serializers.ModelSerializer[SloAlert]):
    topology = serializers.IntegerField(source="slo.topology_id", read_only=True)
    topology_name = serializers.CharField(source="slo.topology.name", read_only=True)
    sli = serializers.CharField(source="slo.sli", read_only=True)
    events = AlertEventSerializer(many=True, read_only=True)

    class Meta:
        model = SloAlert
        fields = [
            "id", "slo", "topology", "topology_name", "sli", "severity", "state", "rule", "burn_threshold",
            "long_burn", "short_burn", "peak_burn", "started", "ended", "acknowledged", "acknowledged_by",
            "events",
        ]  # fmt: skip


class NotificationTargetSerializer(serializers.ModelSerializer[NotificationTarget]):
    url = serializers.SerializerMethodField(help_text="Shown masked: scheme, host and the last 4 characters.")

    class Meta:
        model = NotificationTarget
        fields = ["id", "name", "topology", "format", "url", "enabled", "created", "updated"]

    def get_url(self, obj: NotificationTarget) -> str:
        return mask_url(obj.url)


class NotificationTargetCreateSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=100)
    url = serializers.CharField(
        max_length=2000, help_text="The webhook URL; stored encrypted, never shown whole."
    )
    format = serializers.ChoiceField(choices=TargetFormat.choices, default=TargetFormat.JSON)
    topology = serializers.PrimaryKeyRelatedField(
        queryset=Topology.objects.all(), required=False, allow_null=True, help_text="null: every topology."
    )


class NotificationTargetUpdateSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=100, required=False)
    url = serializers.CharField(max_length=2000, required=False)
    format = serializers.ChoiceField(choices=TargetFormat.choices, required=False)
    topology = serializers.PrimaryKeyRelatedField(
        queryset=Topology.objects.all(), required=False, allow_null=True
    )
    enabled = serializers.BooleanField(required=False)


class DeliveryAttemptSerializer(serializers.ModelSerializer[DeliveryAttempt]):
    class Meta:
        model = DeliveryAttempt
        fields = ["number", "at", "status_code", "error", "duration_ms"]


class NotificationDeliverySerializer(serializers.ModelSerializer[Delivery]):
    attempt_rows = DeliveryAttemptSerializer(many=True, read_only=True)

    class Meta:
        model = Delivery
        fields = [
            "id", "target", "alert", "event", "state", "attempts", "next_attempt", "last_status",
            "last_error", "created", "finished", "payload", "attempt_rows",
        ]  # fmt: skip
