from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.api.errors import DomainError
from perfmodel.api.serializers import CalibrationSerializer
from whatif import simulation, tracereplay
from whatif.models import WhatIfRun
from workload.tracefile import FORMATS


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

    trace = serializers.CharField(
        required=False,
        trim_whitespace=False,
        help_text="A trace file's content to replay instead of the window's traffic: Tandem's JSONL, "
        "Mooncake's JSONL or Azure's CSV (docs/hit-rate.md, \"Trace files\"); its latest "
        f"{simulation.MAX_REQUESTS} requests are kept, and the replay budget may keep fewer.",
    )
    trace_format = serializers.ChoiceField(
        choices=list(FORMATS),
        required=False,
        help_text="The trace's format; default: read from its first line.",
    )
    trace_name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=200,
        default="",
        help_text="A name for the imported trace (its file's).",
    )

    def validate_end(self, value: float | None) -> float | None:
        if value is not None:
            problem = simulation.window_problem(end=value, now=time.time())
            if problem:
                raise serializers.ValidationError(problem)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """An imported trace is read here: a bad one is a field error naming its line and field."""
        text, chosen = attrs.pop("trace", None), attrs.pop("trace_format", "")
        name = attrs.pop("trace_name", "")
        if text is None:
            if chosen:
                raise serializers.ValidationError({"trace_format": ["give the trace too, or leave this out"]})
            return attrs
        try:
            attrs["trace"] = tracereplay.read(text, file_format=chosen, name=name)
        except DomainError as error:
            raise serializers.ValidationError(error.fields) from None
        return attrs


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
    requests = serializers.IntegerField(
        required=False, help_text="Requests replayed (within the work bounds)."
    )
    traffic_source = serializers.ChoiceField(
        choices=list(simulation.SOURCES),
        required=False,
        help_text="What was replayed: gateway = the gateway's per-request records of the window (arrivals, "
        "lengths, prefix groups, as recorded); imported = the trace the run was started with; rollups = "
        "per-minute telemetry as Poisson arrivals at each minute's mean rate and lengths (too few records).",
    )
    recorded_requests = serializers.IntegerField(
        required=False, help_text="Requests the source held for the window, before the work bounds."
    )
    recommended = WhatIfSplitSerializer(
        required=False,
        help_text="Best attainment, goodput breaking ties; only when the model was calibrated (calibrated).",
    )
    calibrated = serializers.BooleanField(
        required=False,
        help_text="True: simulated with the rates fitted to this topology's telemetry (calibration.perf); "
        "false: the nominal model, and no split is recommended.",
    )
    calibration = CalibrationSerializer(
        required=False,
        help_text="The topology's calibration over the window (its last hour at most), with the fit error: "
        "predicted vs measured TTFT and TBT p50 per role (fit_errors).",
    )
    no_recommendation = serializers.CharField(
        required=False, help_text="Why no split is recommended, and what to run to get a calibration."
    )
    current = SplitSerializer(required=False)
    note = serializers.CharField(required=False)
    incomplete = serializers.BooleanField(required=False, help_text="True: the run was cancelled part-way.")


IMPORTED_TRACE = {
    "type": "object",
    "nullable": True,
    "description": "The imported trace the run replays (null: the window's recorded traffic).",
    "properties": {
        "file_format": {"type": "string", "enum": list(FORMATS)},
        "name": {"type": "string"},
        "total": {"type": "integer", "description": "Requests in the file (its latest ones are replayed)."},
    },
    "required": ["file_format", "name", "total"],
}


class WhatIfRunSerializer(serializers.ModelSerializer[WhatIfRun]):
    requested_by = serializers.CharField(source="requested_by_label", read_only=True)
    imported_trace = serializers.SerializerMethodField()
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
            "imported_trace",
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

    @extend_schema_field(IMPORTED_TRACE)
    def get_imported_trace(self, run: WhatIfRun) -> dict[str, Any] | None:
        if not run.trace:
            return None
        return {key: run.trace[key] for key in ("file_format", "name", "total")}

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
