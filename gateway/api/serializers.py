from __future__ import annotations

from typing import Any

from rest_framework import serializers

from gateway.models import BreakerEvent, GatewayRequest, ProbeRun, Route
from telemetry.api.serializers import TimeField

SERIES_MAX_WINDOW_S = 31 * 24 * 3600


class RouteSerializer(serializers.ModelSerializer[Route]):
    """A topology's gateway settings. The fallback key is write-only: reads say only whether one is set."""

    aliases = serializers.ListField(
        child=serializers.CharField(max_length=256),
        max_length=20,
        required=False,
        help_text="Other model names clients may use for this topology.",
    )
    fallback_api_key = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=4096
    )
    fallback_key_set = serializers.SerializerMethodField()
    aliases = serializers.ListField(
        child=serializers.CharField(max_length=256, allow_blank=True),
        max_length=20,
        required=False,
        help_text="Other model names the gateway routes to this topology (at most 20).",
    )
    serving_endpoint = serializers.SerializerMethodField(
        help_text="What the gateway uses: entered, or discovered."
    )
    discovered_stale_reason = serializers.CharField(
        read_only=True,
        help_text="Why the last discovery could not read the cluster (403, 5xx, timeout, unreachable); "
        "discovered_url is then the last known one, kept. Empty: confirmed by the cluster at the last look.",
    )
    discovered_stale_since = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="Since when discovery has not been able to confirm discovered_url; null when it is fresh.",
    )

    class Meta:
        model = Route
        fields = [
            "aliases",
            "endpoint_url",
            "discovered_url",
            "discovered_stale_reason",
            "discovered_stale_since",
            "serving_endpoint",
            "fallback_base_url",
            "fallback_api_key",
            "fallback_key_set",
            "fallback_model",
            "fallback_on_429",
            "timeout_seconds",
            "breaker_failures",
            "breaker_open_seconds",
            "updated",
        ]
        read_only_fields = ["discovered_url", "discovered_stale_reason", "discovered_stale_since", "updated"]
        extra_kwargs: dict[str, Any] = {
            "timeout_seconds": {"min_value": 1, "max_value": 3600},
            "breaker_failures": {"min_value": 1, "max_value": 100},
            "breaker_open_seconds": {"min_value": 1, "max_value": 3600},
        }

    def get_fallback_key_set(self, route: Route) -> bool:
        return bool(route.fallback_api_key)

    def get_serving_endpoint(self, route: Route) -> str:
        return route.endpoint_url or route.discovered_url


class GatewayRequestSerializer(serializers.ModelSerializer[GatewayRequest]):
    class Meta:
        model = GatewayRequest
        fields = [
            "created",
            "key_id",
            "model",
            "endpoint",
            "backend",
            "status",
            "error_code",
            "stream",
            "prompt_tokens",
            "completion_tokens",
            "ttft_ms",
            "latency_ms",
        ]


class BreakerEventSerializer(serializers.ModelSerializer[BreakerEvent]):
    class Meta:
        model = BreakerEvent
        fields = ["created", "state", "reason"]


class ProbeResultSerializer(serializers.Serializer[dict[str, Any]]):
    name = serializers.CharField()
    passed = serializers.BooleanField()
    summary = serializers.CharField()
    figures = serializers.DictField()
    diagnosis = serializers.ListField(child=serializers.CharField())


class ProbeRunSerializer(serializers.ModelSerializer[ProbeRun]):
    results = ProbeResultSerializer(many=True, read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", default="", read_only=True)

    class Meta:
        model = ProbeRun
        fields = [
            "id",
            "topology",
            "kinds",
            "params",
            "state",
            "results",
            "error",
            "requested_by",
            "created",
            "started",
            "finished",
        ]
        read_only_fields = fields


class VerifyRequestSerializer(serializers.Serializer[dict[str, Any]]):
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=["smoke", "prefix", "concurrency", "links", "fallback", "pd"]),
        required=False,
        max_length=6,
        help_text="Default: all of them.",
    )
    params = serializers.DictField(
        required=False,
        help_text="prefix_words, prefix_requests, prefix_margin, concurrency_clients, concurrency_seconds",
    )


class GatewaySeriesQuerySerializer(serializers.Serializer[dict[str, Any]]):
    start = TimeField(required=False, help_text="Window start; default end minus 1 hour.")
    end = TimeField(required=False, help_text="Window end; default now.")
    step = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=86400,
        help_text="Bucket width in seconds, aligned to multiples of it. Default: about 120 buckets.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        import time

        from gateway import series

        end = attrs.get("end", time.time())
        start = attrs.get("start", end - 3600)
        if start >= end:
            raise serializers.ValidationError(
                {"start": ["start must be before end; swap them or move start back"]}
            )
        if end - start > SERIES_MAX_WINDOW_S:
            raise serializers.ValidationError({"start": ["the window is longer than 31 days; shorten it"]})
        step = attrs.get("step") or series.auto_step(end - start)
        if (end - start) / step > series.MAX_BUCKETS:
            least = int((end - start) / series.MAX_BUCKETS) + 1
            message = f"{step} s gives more than {series.MAX_BUCKETS} buckets; use step ≥ {least}"
            raise serializers.ValidationError({"step": [message]})
        return {"start": start, "end": end, "step": step}


class GatewayMarkerSerializer(serializers.Serializer[dict[str, Any]]):
    ts = serializers.FloatField(help_text="Unix seconds.")
    kind = serializers.ChoiceField(
        choices=["fallback", "breaker_open", "breaker_half_open", "breaker_closed"],
        help_text="fallback: the first bucket of a run served (partly) by the fallback; breaker_*: a "
        "change of the circuit breaker.",
    )
    text = serializers.CharField()


class GatewayTotalsSerializer(serializers.Serializer[dict[str, Any]]):
    requests = serializers.FloatField(help_text="Every request in the window, verification included.")
    cluster = serializers.FloatField(help_text="Applications' requests served by the cluster.")
    fallback = serializers.FloatField(help_text="Applications' requests served by the fallback upstream.")
    verification = serializers.FloatField(
        help_text="Requests made by the topology's verification probes (any backend; none on a key's series)."
    )
    refused = serializers.FloatField(help_text="Answered with a 4xx (key, limit, quota, model).")
    errors = serializers.FloatField(help_text="Answered with a 5xx.")  # type: ignore[assignment]
    error_share = serializers.FloatField(
        allow_null=True, help_text="errors / requests; null without requests."
    )


class GatewaySeriesSerializer(serializers.Serializer[dict[str, Any]]):
    start = serializers.FloatField(help_text="First bucket start (unix seconds, aligned to step).")
    end = serializers.FloatField()
    step = serializers.IntegerField(help_text="Bucket width in seconds.")
    timestamps = serializers.ListField(child=serializers.FloatField(), help_text="Bucket starts.")
    series = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text="Aligned with timestamps. rps.cluster, rps.fallback, rps.none (refused before "
        "dispatch): applications' requests/s; rps.verification: the verification probes' requests/s; "
        "share.errors (5xx), share.refused (4xx): 0..1 of all requests; latency.p50, latency.p95: ms over "
        "the answered requests (status < 400); ttft.p50, ttft.p95: ms over the answered streamed "
        "requests (a whole answer has no first token). Rates are 0 in a bucket without requests; the "
        "others null (no value: a gap), ttft.* also null when no answered request streamed.",
    )
    totals = GatewayTotalsSerializer()
    events = GatewayMarkerSerializer(many=True, help_text="Fallback runs and breaker changes in the window.")
