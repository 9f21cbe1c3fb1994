from __future__ import annotations

import time
from typing import Any

from rest_framework import serializers

from telemetry.api.serializers import TimeField
from workload.tracefile import FORMATS

MAX_WINDOW_S = 31 * 86400


class WindowQuerySerializer(serializers.Serializer):
    start = TimeField(required=False, help_text="Window start; default end minus 1 hour.")
    end = TimeField(required=False, help_text="Window end; default now.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        end = attrs.get("end", time.time())
        start = attrs.get("start", end - 3600)
        if start >= end:
            raise serializers.ValidationError({"start": ["start must be before end; swap them"]})
        if end - start > MAX_WINDOW_S:
            raise serializers.ValidationError({"start": ["the window is at most 31 days; move start later"]})
        return {"start": start, "end": end}


class ImportQuerySerializer(serializers.Serializer):
    # Not `format`: DRF reads that query parameter as the answer's renderer.
    file_format = serializers.ChoiceField(
        choices=list(FORMATS), required=False, help_text="The file's format; default: detected."
    )


class HitRateSerializer(serializers.Serializer):
    start = serializers.FloatField(help_text="Unix seconds.")
    end = serializers.FloatField(help_text="Unix seconds.")
    requests = serializers.IntegerField(help_text="Application requests with a prompt in the window.")
    reuse = serializers.FloatField(
        allow_null=True, help_text="Share of requests whose prefix group was seen earlier in the window."
    )
    routed_warm = serializers.FloatField(
        allow_null=True,
        help_text="Share of those repeats placed on an instance that had served their prefix group.",
    )
    routed_source = serializers.CharField(help_text="router, traces, or empty when unknown.")
    delivered = serializers.FloatField(
        allow_null=True, help_text="The engines' prefix-cache hit rate over the window (tokens)."
    )
    verdict = serializers.ChoiceField(choices=["little_reuse", "routing", "engine", "fine", "unknown"])
    sentence = serializers.CharField(help_text="The largest loss, in words.")


class TraceSummarySerializer(serializers.Serializer):
    format = serializers.CharField(help_text="The file's format: tandem, mooncake or azure.")
    requests = serializers.IntegerField()
    duration_ms = serializers.IntegerField(help_text="From the first arrival to the last.")
    prompt_tokens_mean = serializers.FloatField()
    output_tokens_mean = serializers.FloatField()
    prefix_groups = serializers.IntegerField(help_text="Distinct prefix groups (0: the format has none).")
    reuse = serializers.FloatField(
        allow_null=True, help_text="Share of requests repeating an earlier prefix group; null without groups."
    )
