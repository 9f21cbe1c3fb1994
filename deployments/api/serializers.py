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
    override_preflight = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=300,
        help_text="Why to deploy although preflight blocks it (recorded in the audit log); omitted: a "
        "blocking preflight finding stops the deploy before anything is applied.",
    )


class RollbackInputSerializer(serializers.Serializer[dict[str, object]]):
    revision = AsciiIntegerField(
        required=False,
        min_value=1,
        help_text="Revision number to return to, e.g. 3; omitted: the newest revision other than the "
        "running one that ran successfully.",
    )
    allow_untested = serializers.BooleanField(
        default=False,
        help_text="Confirm a revision that never ran successfully (it failed, or was never deployed).",
    )


class RollbackCandidateSerializer(serializers.Serializer[dict[str, object]]):
    revision = serializers.IntegerField()
    image = serializers.CharField()
    ratio = serializers.CharField(help_text="Prefill and decode replicas, e.g. 2P/1D.")
    known_good = serializers.BooleanField(help_text="A deploy of it once succeeded.")
    ratio_only = serializers.BooleanField(help_text="It changed replica counts only (scale or rebalancing).")
    outcome = serializers.CharField()
    differences = serializers.ListField(
        child=serializers.CharField(), help_text="What deploying it changes against the running revision."
    )
    folded = serializers.ListField(
        child=serializers.IntegerField(), help_text="Ratio-change revisions this entry stands for."
    )


class RollbackPlanSerializer(serializers.Serializer[dict[str, object]]):
    running = serializers.IntegerField(allow_null=True)
    desired = serializers.IntegerField(allow_null=True)
    default = serializers.IntegerField(
        allow_null=True, help_text="What a rollback without a revision deploys: the newest known-good one."
    )
    keep_running = serializers.BooleanField(
        help_text="The desired revision is not the running one: POST keep-running/ to keep the running one."
    )
    candidates = RollbackCandidateSerializer(many=True)


class KeepRunningSerializer(serializers.Serializer[dict[str, object]]):
    desired = serializers.IntegerField()
    running = serializers.IntegerField()
    message = serializers.CharField()


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


class TopologyRef(serializers.Serializer[dict[str, object]]):
    id = serializers.IntegerField()
    name = serializers.CharField()


class ModelNameRoutingSerializer(serializers.Serializer[dict[str, object]]):
    model = serializers.CharField(help_text="The model name clients ask the gateway for.")
    served_here = serializers.BooleanField(help_text="The gateway sends this name to this topology.")
    served_by_id = serializers.IntegerField(
        allow_null=True, help_text="The topology the gateway sends the name to; null: none yet."
    )
    served_by_name = serializers.CharField(allow_null=True)
    shared_with = TopologyRef(many=True, help_text="Other topologies answering to the same name.")
    why = serializers.CharField(help_text="Which topology serves the name and why, in words.")
