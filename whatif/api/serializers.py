from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from whatif import simulation
from whatif.models import WhatIfRun


class WhatIfRunInputSerializer(serializers.Serializer[dict[str, Any]]):
    window_seconds = serializers.IntegerField(
        min_value=60,
        max_value=simulation.MAX_WINDOW_SECONDS,
        default=3600,
        help_text="How much recorded traffic to consider (60 s to one day); the replay keeps the latest "
        "part of it that fits the what-if's work budget.",
    )
    end = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        help_text=f"Unix time the window ends; default now. At most {simulation.MAX_FUTURE_SECONDS} s after "
        f"the server's clock and within the last {simulation.OLDEST_END_SECONDS // 86400} days.",
    )
    splits = serializers.ListField(
        child=serializers.ListField(
            child=serializers.IntegerField(min_value=1),
            min_length=2,
            max_length=2,
            error_messages={
                "min_length": "give each split as [prefill, decode], e.g. [2, 2]",
                "max_length": "give each split as [prefill, decode], e.g. [2, 2]",
                "not_a_list": "give each split as [prefill, decode], e.g. [2, 2]",
            },
        ),
        required=False,
        allow_empty=False,
        max_length=64,
        help_text="[[prefill, decode], ...] to consider; default every split the budget and bounds allow.",
    )

    def validate_end(self, value: float | None) -> float | None:
        if value is not None:
            problem = simulation.window_problem(end=value, now=time.time())
            if problem:
                raise serializers.ValidationError(problem)
        return value


class SplitSerializer(serializers.Serializer[dict[str, Any]]):
    prefill = serializers.IntegerField()
    decode = serializers.IntegerField()


class WhatIfSplitSerializer(SplitSerializer):
    attainment = serializers.FloatField()
    ttft_attainment = serializers.FloatField()
    tbt_attainment = serializers.FloatField()
    goodput_rps = serializers.FloatField()
    failed = serializers.IntegerField()


class WhatIfResultSerializer(serializers.Serializer[dict[str, Any]]):
    splits = WhatIfSplitSerializer(
        many=True, help_text="One row per simulated split (all, or those done before a cancel)."
    )
    requests = serializers.IntegerField(required=False)
    recommended = WhatIfSplitSerializer(required=False, help_text="Best attainment, goodput breaking ties.")
    current = SplitSerializer(required=False)
    note = serializers.CharField(required=False)
    incomplete = serializers.BooleanField(required=False, help_text="True: the run was cancelled part-way.")


class WhatIfRunSerializer(serializers.ModelSerializer[WhatIfRun]):
    requested_by = serializers.CharField(source="requested_by_label", read_only=True)
    result = serializers.SerializerMethodField()
    splits = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()), read_only=True
    )

    class Meta:
        model = WhatIfRun
        fields = [
            "id",
            "topology",
            "window_start",
            "window_end",
            "splits",
            "requested_by",
            "created_at",
            "started_at",
            "finished_at",
            "state",
            "progress",
            "step",
            "cancel_requested",
            "result",
            "error",
        ]
        read_only_fields = fields

    @extend_schema_field(WhatIfResultSerializer)
    def get_result(self, run: WhatIfRun) -> dict[str, Any]:
        """The simulator's answer; ``{"splits": []}`` until a split is done (the state says why)."""
        return dict(WhatIfResultSerializer(run.result or {"splits": []}).data)


class ApplyInputSerializer(serializers.Serializer[dict[str, Any]]):
    prefill = serializers.IntegerField(min_value=1, max_value=10000)
    decode = serializers.IntegerField(min_value=1, max_value=10000)
    confirm = serializers.BooleanField(
        default=False, help_text="false: only the diff (200); true: apply it (202)."
    )


class ApplyPreviewSerializer(serializers.Serializer[dict[str, Any]]):
    run = serializers.IntegerField()
    current = SplitSerializer()
    proposed = SplitSerializer()
    path = serializers.ChoiceField(choices=["rebalance", "revision"])
    explanation = serializers.CharField()


class ApplyOutcomeSerializer(ApplyPreviewSerializer):
    rebalance = serializers.IntegerField(allow_null=True, help_text="The rebalance started (path rebalance).")
    revision = serializers.IntegerField(
        allow_null=True, help_text="The revision number saved (path revision)."
    )
