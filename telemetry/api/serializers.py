"""Telemetry API: query validation and the documented response shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from telemetry.models import TelemetryAlert
from telemetry.series import is_valid_series_name

MAX_SERIES = 50
MAX_WINDOW_S = 31 * 24 * 3600


class TimeField(serializers.Field):
    """Unix seconds (``1767225600`` or ``1767225600.5``) or ISO 8601 (``2026-11-30T11:00:00Z``)."""

    def to_internal_value(self, data: Any) -> float:
        text = str(data).strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise serializers.ValidationError(
                f"{text!r} is not a time; use unix seconds (1767225600) or ISO 8601 (2026-11-30T11:00:00Z)"
            ) from None
        if parsed.tzinfo is None:
            raise serializers.ValidationError(f"{text!r} has no time zone; add Z or +00:00")
        return parsed.timestamp()

    def to_representation(self, value: float) -> float:
        return value


class HistoryQuerySerializer(serializers.Serializer):
    series = serializers.CharField(
        help_text="Comma-separated series names, e.g. topology.hit_rate,role.prefill.ttft_p95 "
        "(see GET .../metrics/latest/ and telemetry.series for the scheme)."
    )
    start = TimeField(required=False, help_text="Window start; default end minus 15 minutes.")
    end = TimeField(required=False, help_text="Window end; default now.")
    step = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=86400,
        help_text="Bucket width in seconds; buckets are aligned to multiples of it. Default: ~300 buckets.",
    )

    def validate_series(self, value: str) -> list[str]:
        names = [name.strip() for name in value.split(",") if name.strip()]
        if not names:
            raise serializers.ValidationError("name at least one series, e.g. series=topology.hit_rate")
        if len(names) > MAX_SERIES:
            raise serializers.ValidationError(f"at most {MAX_SERIES} series per request; split the request")
        bad = [name for name in names if not is_valid_series_name(name)]
        if bad:
            raise serializers.ValidationError(
                f"unknown series {', '.join(bad)}; names look like topology.hit_rate, role.decode.itl_p95, "
                "pod.<pod>.waiting or link.<prefill>.<decode>.xfer_p95_ms"
            )
        return list(dict.fromkeys(names))

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        import time

        from telemetry.selectors import MAX_BUCKETS, auto_step

        end = attrs.get("end", time.time())
        start = attrs.get("start", end - 900)
        if start >= end:
            raise serializers.ValidationError(
                {"start": ["start must be before end; swap them or move start back"]}
            )
        if end - start > MAX_WINDOW_S:
            raise serializers.ValidationError(
                {"start": ["the window is longer than 31 days; rollups are kept 30"]}
            )
        step = attrs.get("step") or auto_step(end - start)
        if (end - start) / step > MAX_BUCKETS:
            least = int((end - start) / MAX_BUCKETS) + 1
            message = f"{step} s gives more than {MAX_BUCKETS} buckets; use step ≥ {least}"
            raise serializers.ValidationError({"step": [message]})
        return {**attrs, "start": start, "end": end, "step": step}


class EventSerializer(serializers.Serializer):
    ts = serializers.FloatField(help_text="Unix seconds.")
    kind = serializers.ChoiceField(
        choices=["deploy", "role_change", "alert_raised", "alert_resolved"], help_text="What happened."
    )
    text = serializers.CharField()


class HistorySerializer(serializers.Serializer):
    start = serializers.FloatField(help_text="First bucket start (unix seconds, aligned to step).")
    end = serializers.FloatField()
    step = serializers.IntegerField(help_text="Bucket width in seconds.")
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["raw", "rollup"], help_text="raw points (windows ≤ 1 h within 24 h) or 1-minute rollups."
    )
    timestamps = serializers.ListField(child=serializers.FloatField(), help_text="Bucket starts.")
    series = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text="Per series name, the mean per bucket aligned with timestamps; null = no data.",
    )
    events = EventSerializer(many=True, help_text="Deploys, role changes and SLO alerts in the window.")


LINKS_HELP = " ".join(
    [
        "Per KV link (every prefill → decode pair): prefill, decode, state up|degraded|down|unknown,",
        "status_code, xfer_p50_ms, xfer_p95_ms (the decode pod's connector transfer time; shared=true",
        "when its links share it), bytes_per_s, transfers, failed, probe_ms (Tandem's probe through the",
        "pair), reason, sources [{kind: probe|metrics|log, detail, ts}], observed_at (freshness),",
        "blind [what the engine cannot show]. See docs/kv-links.md.",
    ]
)


class SnapshotSerializer(serializers.Serializer):
    """The TopologySnapshot of telemetry.snapshot (units documented there)."""

    topology_id = serializers.IntegerField()
    ts = serializers.FloatField(help_text="Collection time, unix seconds.")
    interval_s = serializers.FloatField()
    health = serializers.DictField(
        help_text="{state: healthy|degraded|down|stale|unknown, reasons: [sentence]}"
    )
    slo = serializers.DictField(help_text="{ttft_ms, tbt_ms (targets), ttft_p95_ms, tbt_p95_ms, state}")
    totals = serializers.DictField(help_text="Topology-wide derived values (quantiles in seconds).")
    roles = serializers.DictField(help_text="prefill / decode: the same values per role.")
    pods = serializers.ListField(child=serializers.DictField(), help_text="One entry per pod.")
    links = serializers.ListField(
        child=serializers.DictField(),
        help_text=LINKS_HELP,
    )
    events = EventSerializer(many=True)


class TelemetryAlertSerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField()

    class Meta:
        model = TelemetryAlert
        fields = [
            "id",
            "metric",
            "state",
            "message",
            "target_ms",
            "observed_ms",
            "peak_ms",
            "raised",
            "resolved",
        ]

    def get_state(self, obj: TelemetryAlert) -> str:
        return "open" if obj.is_open else "resolved"
