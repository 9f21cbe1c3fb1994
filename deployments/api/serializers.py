from __future__ import annotations

from rest_framework import serializers

from controlplane.api.fields import AsciiIntegerField
from deployments.models import Deployment, DeploymentStep, DeployPolicy


class DeploymentStepSerializer(serializers.ModelSerializer[DeploymentStep]):
    class Meta:
        model = DeploymentStep
        fields = ["time", "state", "message", "detail"]


class DiagnosisSerializer(serializers.Serializer[dict[str, object]]):
    code = serializers.CharField()
    message = serializers.CharField()
    fix = serializers.CharField()
    pods = serializers.ListField(child=serializers.CharField())


class DeploymentSerializer(serializers.ModelSerializer[Deployment]):
    revision = serializers.IntegerField(source="revision_number", read_only=True, allow_null=True)
    rolled_back_to = serializers.SerializerMethodField()
    previous_revision = serializers.SerializerMethodField()
    requested_by = serializers.CharField(source="requested_by_label", read_only=True)
    description = serializers.CharField(source="describe", read_only=True)
    progress_percent = serializers.IntegerField(read_only=True)
    diagnosis = DiagnosisSerializer(many=True, read_only=True)

    class Meta:
        model = Deployment
        fields = [
            "id",
            "topology",
            "topology_name",
            "revision",
            "kind",
            "state",
            "description",
            "params",
            "requested_by",
            "created",
            "started",
            "finished",
            "pods_ready",
            "pods_total",
            "progress_percent",
            "error",
            "diagnosis",
            "previous_revision",
            "rolled_back_to",
            "attempts",
            "cancel_requested",
        ]
        read_only_fields = fields

    def get_rolled_back_to(self, obj: Deployment) -> int | None:
        return obj.rolled_back_to.number if obj.rolled_back_to is not None else None

    def get_previous_revision(self, obj: Deployment) -> int | None:
        return obj.previous_revision.number if obj.previous_revision is not None else None


class DeploymentDetailSerializer(DeploymentSerializer):
    steps = DeploymentStepSerializer(many=True, read_only=True)

    class Meta(DeploymentSerializer.Meta):
        fields = [*DeploymentSerializer.Meta.fields, "steps"]
        read_only_fields = fields


class DeployInputSerializer(serializers.Serializer[dict[str, object]]):
    revision = AsciiIntegerField(
        required=False, min_value=1, help_text="Revision number to deploy; the current revision when omitted."
    )


class RollbackInputSerializer(serializers.Serializer[dict[str, object]]):
    revision = AsciiIntegerField(min_value=1, help_text="Revision number to return to, e.g. 3.")


class ScaleInputSerializer(serializers.Serializer[dict[str, object]]):
    role = serializers.ChoiceField(choices=["prefill", "decode"], help_text="prefill or decode")
    replicas = AsciiIntegerField(min_value=0, max_value=256, help_text="New replica count, e.g. 2.")


class DeployPolicySerializer(serializers.ModelSerializer[DeployPolicy]):
    ready_timeout_seconds = AsciiIntegerField(
        allow_null=True,
        min_value=10,
        max_value=86400,
        help_text="Seconds to wait for every pod to be Ready; null uses DEPLOY_READY_TIMEOUT_SECONDS.",
    )
    auto_rollback = serializers.BooleanField(
        allow_null=True,
        help_text="Return to the last good revision on failure; null uses DEPLOY_AUTO_ROLLBACK.",
    )
    keep_failed_first_deploy = serializers.BooleanField(
        required=False,
        help_text="Leave a failed first deploy's objects in the cluster (default false: they are removed). "
        "Omitted: unchanged.",
    )
    effective_ready_timeout_seconds = serializers.SerializerMethodField()
    effective_auto_rollback = serializers.SerializerMethodField()

    class Meta:
        model = DeployPolicy
        fields = [
            "ready_timeout_seconds",
            "auto_rollback",
            "keep_failed_first_deploy",
            "effective_ready_timeout_seconds",
            "effective_auto_rollback",
        ]

    def get_effective_ready_timeout_seconds(self, obj: DeployPolicy) -> int:
        return obj.effective_ready_timeout_seconds

    def get_effective_auto_rollback(self, obj: DeployPolicy) -> bool:
        return obj.effective_auto_rollback
