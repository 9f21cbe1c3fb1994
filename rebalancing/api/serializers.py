from __future__ import annotations

from typing import Any

from rest_framework import serializers

from rebalancing.models import Decision, PlannerConfig, PlannerMode, Rebalance


class SwitchRoleInputSerializer(serializers.Serializer[dict[str, Any]]):
    instance = serializers.CharField(  # type: ignore[assignment]
        max_length=253, help_text="The pod to switch, e.g. demo-0-decode-1-0."
    )
    target_role = serializers.ChoiceField(choices=["prefill", "decode"])
    drain_timeout_seconds = serializers.FloatField(
        required=False,
        min_value=1,
        max_value=3600,
        help_text="In-place switches: how long to wait for in-flight requests (default "
        "REBALANCE_DRAIN_TIMEOUT_SECONDS); the restart-based path drains within the pod's grace period.",
    )


class RatioInputSerializer(serializers.Serializer[dict[str, Any]]):
    prefill = serializers.IntegerField(min_value=1, max_value=10000)
    decode = serializers.IntegerField(min_value=1, max_value=10000)


class OtherOwnerSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(
        choices=["kthena_policy", "hpa", "keda", "argocd", "flux", "field_manager"],
        help_text="What else sets the replicas: a Kthena AutoscalingPolicy, an HPA, a KEDA ScaledObject, a "
        "GitOps tool (Argo CD, Flux), or a field manager that changed them (kubectl, a script).",
    )
    name = serializers.CharField(help_text='e.g. "HPA default/llama-decode", or the field manager "kubectl".')
    roles = serializers.ListField(
        child=serializers.CharField(), help_text="The roles whose replicas it sets."
    )
    message = serializers.CharField(help_text="What it does, in words.")
    remedy = serializers.CharField(help_text="What to do about it.")
    blocking = serializers.BooleanField(
        help_text="True: auto mode refuses to start, or pauses, because of it."
    )
    handoff = serializers.CharField(
        allow_blank=True,
        help_text="A Kthena policy scaling both roles: its name, to hand the ratio bounds to "
        "(planner/handoff/).",
    )
    change = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="field_manager: the role counts it changed, {role: [from, to]}.",
    )


class PlannerSerializer(serializers.ModelSerializer[PlannerConfig]):
    mode = serializers.ChoiceField(choices=PlannerMode.choices)
    params = serializers.DictField(
        required=False, default=dict, help_text="rebalancing.policy.Params overrides."
    )
    min_ratio = serializers.FloatField(required=False, allow_null=True, default=None)
    max_ratio = serializers.FloatField(required=False, allow_null=True, default=None)
    state = serializers.DictField(read_only=True)
    last_tick = serializers.DateTimeField(read_only=True, allow_null=True)
    paused_reason = serializers.CharField(
        read_only=True,
        help_text="Why auto mode is paused: another owner of the replica counts, and what to do. Empty when "
        "it is not paused; setting the mode to auto again resumes it once nothing else owns them.",
    )
    paused_at = serializers.DateTimeField(read_only=True, allow_null=True)
    other_owners = OtherOwnerSerializer(
        many=True, read_only=True, help_text="What else sets the replicas, as the last check found it."
    )

    class Meta:
        model = PlannerConfig
        fields = [
            "mode",
            "params",
            "min_ratio",
            "max_ratio",
            "state",
            "last_tick",
            "paused_reason",
            "paused_at",
            "other_owners",
        ]


class HandoffInputSerializer(serializers.Serializer[dict[str, Any]]):
    policy = serializers.CharField(
        max_length=253,
        help_text="The Kthena AutoscalingPolicy (in the topology's namespace) named in other_owners.",
    )


class RebalanceSerializer(serializers.ModelSerializer[Rebalance]):
    class Meta:
        model = Rebalance
        fields = [
            "id",
            "topology",
            "kind",
            "state",
            "from_prefill",
            "from_decode",
            "target_prefill",
            "target_decode",
            "moves",
            "next_move",
            "deployment",
            "deployments",
            "params",
            "log",
            "requested_by_label",
            "error",
            "created",
            "finished",
        ]


class DecisionSerializer(serializers.ModelSerializer[Decision]):
    class Meta:
        model = Decision
        fields = [
            "id",
            "created",
            "mode",
            "rule",
            "action",
            "from_prefill",
            "from_decode",
            "to_prefill",
            "to_decode",
            "explanation",
            "inputs",
            "outcome",
            "outcome_detail",
            "rebalance",
        ]
