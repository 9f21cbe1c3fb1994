"""Telemetry API: query validation and the documented response shapes."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from rest_framework import serializers

from telemetry.models import TelemetryAlert
from telemetry.series import is_valid_series_name

MAX_SERIES = 50
MAX_WINDOW_S = 31 * 24 * 3600


# The times a window may name: from the epoch to the last second of year 9999 (what a date can hold).
LATEST_TIME = 253402300799.0


class TimeField(serializers.Field):
    """Unix seconds (``1767225600`` or ``1767225600.5``) or ISO 8601 (``2026-11-30T11:00:00Z``), from
    1970 to the end of 9999."""

    def to_internal_value(self, data: Any) -> float:
        text = str(data).strip()
        try:
            value = float(text)
        except ValueError:
            value = self._iso(text)
        if not math.isfinite(value) or not 0 <= value <= LATEST_TIME:
            raise serializers.ValidationError(
                f"{text!r} is out of range; use a time from 1970-01-01T00:00:00Z (0) to "
                f"9999-12-31T23:59:59Z ({LATEST_TIME:.0f})"
            )
        return value

    @staticmethod
    def _iso(text: str) -> float:
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise serializers.ValidationError(
                f"{text!r} is not a time; use unix seconds (1767225600) or ISO 8601 (2026-11-30T11:00:00Z)"
            ) from None
        if parsed.tzinfo is None:
            raise serializers.ValidationError(f"{text!r} has no time zone; add Z or +00:00")
        try:
            return parsed.timestamp()
        except (OverflowError, ValueError):
            return math.inf

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
                f"unknown series {', '.join(bad)}; names look like topology.hit_rate, role.decode.tbt_p95, "
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


UNITS: dict[str, str] = {
    "hit_rate": "Prefix-cache hit rate of this interval: Δhits / Δqueries in tokens, 0..1 (MindIE and "
    "SGLang: their hit-rate gauge). Charts plot it; pages show totals.hit_rate_30s.",
    "external_hit_rate": "Hit rate of the KV connector's external cache (LMCache, Mooncake store), 0..1.",
    "ttft_p50": "Time to first token, p50, SECONDS.",
    "ttft_p95": "Time to first token, p95, SECONDS.",
    "ttft_p99": "Time to first token, p99, SECONDS.",
    "tbt_p50": "Time between tokens (TBT; engines export it as inter-token latency), p50, SECONDS.",
    "tbt_p95": "Time between tokens, p95, SECONDS.",
    "tbt_p99": "Time between tokens, p99, SECONDS.",
    "ttft_mean": "Time to first token, mean of the interval (the histogram's Δsum / Δcount), SECONDS.",
    "tbt_mean": "Time between tokens, mean of the interval (the histogram's Δsum / Δcount), SECONDS.",
    "prompt_tps": "Prompt tokens processed per second.",
    "gen_tps": "Generated (output) tokens per second.",
    "running": "Requests in the running batch (count).",
    "waiting": "Requests queued (count).",
    "kv_usage": "KV-cache usage, 0..1 (mean over pods).",
    "requests_ps": "Answered requests per second.",
    "success_rate": "Served (2xx) / answered requests, 0..1.",
    "error_rate": "Failed by the engine (5xx, 429, aborted, errored) / answered requests, 0..1.",
    "client_error_rate": (
        "Refused as the client's (4xx other than 429: a prompt over the context, a bad parameter) / answered "
        "requests, 0..1. Real vLLM counts statuses by class, so a 429 of its own would be counted here."
    ),
}


class MetricsSerializer(serializers.Serializer):
    """Derived values of one interval; null = no data (never zero). Quantiles in seconds."""

    hit_rate = serializers.FloatField(allow_null=True, help_text=UNITS["hit_rate"])
    external_hit_rate = serializers.FloatField(allow_null=True, help_text=UNITS["external_hit_rate"])
    ttft_p50 = serializers.FloatField(allow_null=True, help_text=UNITS["ttft_p50"])
    ttft_p95 = serializers.FloatField(allow_null=True, help_text=UNITS["ttft_p95"])
    ttft_p99 = serializers.FloatField(allow_null=True, help_text=UNITS["ttft_p99"])
    tbt_p50 = serializers.FloatField(allow_null=True, help_text=UNITS["tbt_p50"])
    tbt_p95 = serializers.FloatField(allow_null=True, help_text=UNITS["tbt_p95"])
    tbt_p99 = serializers.FloatField(allow_null=True, help_text=UNITS["tbt_p99"])
    ttft_mean = serializers.FloatField(allow_null=True, help_text=UNITS["ttft_mean"])
    tbt_mean = serializers.FloatField(allow_null=True, help_text=UNITS["tbt_mean"])
    prompt_tps = serializers.FloatField(allow_null=True, help_text=UNITS["prompt_tps"])
    gen_tps = serializers.FloatField(allow_null=True, help_text=UNITS["gen_tps"])
    running = serializers.FloatField(allow_null=True, help_text=UNITS["running"])
    waiting = serializers.FloatField(allow_null=True, help_text=UNITS["waiting"])
    kv_usage = serializers.FloatField(allow_null=True, help_text=UNITS["kv_usage"])
    requests_ps = serializers.FloatField(allow_null=True, help_text=UNITS["requests_ps"])
    success_rate = serializers.FloatField(allow_null=True, help_text=UNITS["success_rate"])
    error_rate = serializers.FloatField(allow_null=True, help_text=UNITS["error_rate"])
    client_error_rate = serializers.FloatField(allow_null=True, help_text=UNITS["client_error_rate"])


class RoleSampleSerializer(MetricsSerializer):
    pods = serializers.IntegerField()
    ready = serializers.IntegerField()


class TotalsSerializer(RoleSampleSerializer):
    hit_rate_30s = serializers.FloatField(
        allow_null=True,
        required=False,
        help_text="Prefix-cache hit rate over the last 30 s (Σ Δhits / Σ Δqueries), 0..1: stable from one "
        "update to the next; the figure pages show.",
    )
    links_up = serializers.IntegerField()
    links_degraded = serializers.IntegerField()
    links_unknown = serializers.IntegerField()
    links_down = serializers.IntegerField()


class PodSampleSerializer(MetricsSerializer):
    name = serializers.CharField()
    role = serializers.CharField(help_text="prefill | decode | both | router")
    ip = serializers.CharField(allow_blank=True)
    ready = serializers.BooleanField()
    phase = serializers.CharField(allow_blank=True, help_text="Kubernetes pod phase.")
    engine = serializers.CharField(help_text="vllm | sglang | mindie | unknown")
    stale = serializers.BooleanField(help_text="Not scraped in this interval.")
    error = serializers.CharField(allow_null=True, help_text="Why the scrape failed, in words.")
    restarted = serializers.BooleanField(help_text="A counter went down: the engine restarted.")


class SloSerializer(serializers.Serializer):
    ttft_ms = serializers.FloatField(
        allow_null=True, help_text="TTFT p95 target, MILLISECONDS (the topology's)."
    )
    tbt_ms = serializers.FloatField(
        allow_null=True, help_text="TBT p95 target, MILLISECONDS (the topology's)."
    )
    ttft_p95_ms = serializers.FloatField(
        allow_null=True,
        help_text="Observed TTFT p95 compared with the target: totals.ttft_p95 in MILLISECONDS.",
    )
    tbt_p95_ms = serializers.FloatField(
        allow_null=True,
        help_text="Observed TBT p95 compared with the target: totals.tbt_p95 in MILLISECONDS.",
    )
    state = serializers.ChoiceField(choices=["ok", "violated", "unknown"])


class RouterReadingSerializer(serializers.Serializer):
    """The Kthena router's share of the interval (telemetry.router): its prefix-cache match attempts and
    misses for the topology's model, from kthena_router_prefix_cache_match_ratio."""

    service = serializers.CharField(help_text="namespace/name of the router's metrics Service read.")
    replicas = serializers.IntegerField(help_text="Router replicas read this interval.")
    match_attempts = serializers.FloatField(
        allow_null=True, help_text="Prefix-cache match attempts in the interval (null: not known)."
    )
    match_misses = serializers.FloatField(allow_null=True, help_text="Of them, misses (ratio 0).")
    error = serializers.CharField(allow_null=True, help_text="Why (some of) it could not be read.")


class SnapshotSerializer(serializers.Serializer):
    """The TopologySnapshot of telemetry.snapshot. Units: every field says its own; measured latency
    quantiles are seconds (as engines export them), fields ending in _ms are milliseconds (SLO targets
    and the values compared with them, KV transfer times)."""

    topology_id = serializers.IntegerField()
    ts = serializers.FloatField(help_text="Collection time, unix seconds.")
    interval_s = serializers.FloatField()
    health = serializers.DictField(
        help_text="{state: healthy|degraded|down|stale|unknown, reasons: [sentence], problems (only when "
        "there are any): [{key: decode_recompute|kv_expired|silent_transfer_failures|transport_fallback, "
        "name, detail, cost, check, pods: [name]}]}"
    )
    slo = SloSerializer()
    totals = TotalsSerializer(help_text="Topology-wide derived values.")
    roles = serializers.DictField(
        child=RoleSampleSerializer(), help_text="prefill / decode: the same values per role."
    )
    pods = PodSampleSerializer(many=True, help_text="One entry per pod.")
    links = serializers.ListField(
        child=serializers.DictField(),
        help_text=LINKS_HELP,
    )
    events = EventSerializer(many=True)
    router = RouterReadingSerializer(
        required=False, help_text="Kthena topologies only: the router's own prefix-cache match counts."
    )


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
