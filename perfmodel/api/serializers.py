"""The calibration endpoint's query and response shapes."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from perfmodel.selectors import MAX_WINDOW_S, MIN_WINDOW_S

_WINDOW = re.compile(r"^(\d+)([smh]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600}


class CalibrationQuerySerializer(serializers.Serializer[Any]):
    window = serializers.CharField(
        required=False,
        default="10m",
        help_text="How far back to fit: seconds, or with a unit (90s, 10m, 1h); 10 s to 1 h. Default 10m.",
    )

    def validate_window(self, value: str) -> int:
        match = _WINDOW.match(value.strip().lower())
        if match is None:
            raise serializers.ValidationError(f"{value!r} is not a window; write e.g. 120, 90s, 10m or 1h")
        seconds = int(match[1]) * _UNIT[match[2]]
        if not MIN_WINDOW_S <= seconds <= MAX_WINDOW_S:
            raise serializers.ValidationError(
                f"{value!r} is {seconds} s; a window is {MIN_WINDOW_S} s to {MAX_WINDOW_S // 60} minutes "
                "(raw points are what the fit reads)"
            )
        return seconds


class ParameterSerializer(serializers.Serializer[Any]):
    value = serializers.FloatField(allow_null=True, help_text="The fitted value (ms, or 0..1 for hit_rate).")
    intervals = serializers.IntegerField(help_text="Intervals the fit used.")
    basis = serializers.CharField(help_text="How the value was obtained (fit, observed, or nominal).")


class FitErrorSerializer(serializers.Serializer[Any]):
    role = serializers.CharField()
    metric = serializers.ChoiceField(choices=["ttft", "tbt"])
    intervals = serializers.IntegerField()
    mape = serializers.FloatField(allow_null=True, help_text="Median |predicted − measured| / measured.")
    r2 = serializers.FloatField(
        allow_null=True,
        help_text="R² of predicted against measured (interval means; p50s where an engine gives no mean).",
    )


class CalibrationSerializer(serializers.Serializer[Any]):
    topology = serializers.IntegerField()
    window_s = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=["ok", "not enough data", "poor fit"])
    reasons = serializers.ListField(
        child=serializers.CharField(), help_text="Why not ok, and what to run to get a calibration."
    )
    intervals = serializers.IntegerField(help_text="Role intervals in the window.")
    parameters = serializers.DictField(
        child=ParameterSerializer(),
        help_text="prefill_ms_per_token, decode_step_ms, decode_ms_per_seq, step_overhead_ms, hit_rate, "
        "kv_latency_ms.",
    )
    fit_errors = FitErrorSerializer(many=True, help_text="Predicted vs measured TTFT/TBT per role.")
    perf = serializers.DictField(
        help_text="PerfConfig fields for the simulator (empty unless the verdict is ok).",
    )
